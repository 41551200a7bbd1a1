//! `--scale 1000,10000,…`: the cost as stored sessions accumulate.
//!
//! The store is filled to each size in turn with the rows real sessions
//! write — copied from one real policy-governed cycle run first: nine in
//! ten sessions approved and finished (the claimed hold, the finished
//! turn, its audit record), one in ten still waiting at its hold (the
//! store writes its `hold.created` outbox row). The copies are spread over
//! ten agent names, a thousand owners and twenty approver roles. At each
//! size it measures the approval cycle (sequential and concurrent), the
//! first page of `pending` for one agent and for one approver role (the
//! inbox's whole read of the role's holds, and the first page alone), one
//! session's audit listing, `getSnapshot` by id, the bytes on disk per
//! session and the process's resident memory per session.

mod fill;

use std::sync::Arc;
use std::time::{Duration, Instant};

use holdpoint::agent::{Access, Agent};
use holdpoint::session::{AuditQuery, SessionStore, SnapshotQuery};
use serde_json::{Value, json};

use crate::cycle;
use crate::drive;

pub use fill::Templates;

/// The first page a listing returns.
const PAGE: usize = 50;

/// What the inbox reads of one agent before paging (its `SCAN_LIMIT`).
const INBOX_SCAN: usize = 100_000;

/// How the scale run is set up.
pub struct ScaleRun {
    /// The store URL (`memory`, `sqlite:PATH`, `postgres://…`).
    pub store: String,
    /// The sizes to fill to and measure at, ascending.
    pub sizes: Vec<usize>,
    /// Cycles per cycle measurement.
    pub cycles: usize,
    /// Samples per latency measurement.
    pub samples: usize,
    /// Sessions in flight in the concurrent cycle measurement.
    pub concurrency: usize,
}

/// A small deterministic generator of sample indexes (xorshift).
struct Picks(u64);

impl Picks {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

fn percentiles(mut times: Vec<Duration>) -> Value {
    times.sort();
    let at = |p: f64| {
        if times.is_empty() {
            return 0.0;
        }
        let i = ((times.len() as f64 - 1.0) * p).round() as usize;
        times[i.min(times.len() - 1)].as_secs_f64() * 1e3
    };
    json!({"p50Ms": at(0.5), "p99Ms": at(0.99), "samples": times.len()})
}

async fn timed<T, F: std::future::Future<Output = holdpoint::Result<T>>>(
    samples: usize,
    mut f: impl FnMut(usize) -> F,
) -> Result<Vec<Duration>, String> {
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        let started = Instant::now();
        f(i).await.map_err(|e| e.to_string())?;
        times.push(started.elapsed());
    }
    Ok(times)
}

/// `n` cycles over `concurrency` workers; cycles per second.
async fn cycles(
    driver: &drive::Driver,
    tool: &cycle::TransferTool,
    n: usize,
    concurrency: usize,
) -> Result<f64, String> {
    let started = Instant::now();
    let per = n.div_ceil(concurrency.max(1));
    let mut workers = Vec::new();
    for w in 0..concurrency.max(1) {
        let (driver, tool) = (driver.clone(), tool.clone());
        let count = per.min(n.saturating_sub(w * per));
        workers.push(tokio::spawn(async move {
            for _ in 0..count {
                let paused = driver.pause().await?;
                driver.approve(&tool, paused).await?;
            }
            Ok::<_, holdpoint::Error>(())
        }));
    }
    for w in workers {
        w.await
            .map_err(|e| format!("worker panicked: {e}"))?
            .map_err(|e| e.to_string())?;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Bytes the store keeps on disk: SQLite's file with its WAL, or the
/// PostgreSQL tables with their indexes and TOAST (read with `psql`).
fn disk_bytes(store: &str) -> Value {
    if let Some(path) = store
        .strip_prefix("sqlite://")
        .or_else(|| store.strip_prefix("sqlite:"))
    {
        let path = path.split('?').next().unwrap_or(path);
        let size = |p: String| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let (db, wal) = (size(path.to_owned()), size(format!("{path}-wal")));
        return json!({"total": db + wal, "file": db, "wal": wal});
    }
    if store.starts_with("postgres") {
        let sql = "SELECT pg_total_relation_size('holdpoint_snapshots') || ' ' || \
                   pg_total_relation_size('holdpoint_audit') || ' ' || pg_total_relation_size('holdpoint_outbox')";
        let out = std::process::Command::new("psql")
            .args([store, "-Atc", sql])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let n: Vec<u64> = out.split(' ').filter_map(|x| x.parse().ok()).collect();
        if let [snapshots, audit, outbox] = n[..] {
            return json!({"total": snapshots + audit + outbox, "snapshots": snapshots, "audit": audit, "outbox": outbox});
        }
        return json!({"error": format!("psql answered {out:?}")});
    }
    Value::Null
}

/// Measures at the current size; one JSON object.
#[allow(clippy::too_many_arguments)]
async fn measure(
    run: &ScaleRun,
    size: usize,
    store: &Arc<dyn SessionStore>,
    plain: (&drive::Driver, &cycle::TransferTool),
    governed: &Agent,
    templates: &Templates,
    rss_start: u64,
    fill_secs: f64,
) -> Result<Value, String> {
    let rss = crate::sys::rss_bytes();
    let sequential = cycles(plain.0, plain.1, run.cycles, 1).await?;
    let concurrent = cycles(plain.0, plain.1, run.cycles, run.concurrency).await?;
    let banking = match plain.0 {
        drive::Driver::Direct(agent) => agent.clone(),
        drive::Driver::Http(_) | drive::Driver::Answered(_) => {
            return Err("--scale drives the plain cycle in process".into());
        }
    };
    let pending_agent = timed(run.samples, |_| {
        let agent = banking.clone();
        async move {
            agent
                .decisions()
                .pending(SnapshotQuery {
                    limit: Some(PAGE),
                    ..SnapshotQuery::default()
                })
                .await
        }
    })
    .await?;
    let (listed, role_times) = role_scan(run, size, governed).await?;
    let role_page = role_page(run, governed).await?;
    let (audit, get) = store_reads(run, size, store, templates).await?;
    let disk = disk_bytes(&run.store);
    let per_session = |bytes: u64| bytes as f64 / size.max(1) as f64;
    Ok(json!({
        "store": store_kind(&run.store),
        "sessions": size,
        "waiting": size / 10,
        "fillSeconds": fill_secs,
        "cyclesPerSec": {"sequential": sequential, "concurrent": concurrent, "concurrency": run.concurrency, "cycles": run.cycles},
        "pendingAgent": percentiles(pending_agent),
        "pendingRole": {"listed": listed, "latency": percentiles(role_times)},
        "pendingRolePage": percentiles(role_page),
        "auditSession": percentiles(audit),
        "getSnapshot": percentiles(get),
        "disk": disk,
        "diskBytesPerSession": disk.get("total").and_then(Value::as_u64).map(per_session),
        "rssBytes": rss,
        "rssBytesPerSession": per_session(rss.saturating_sub(rss_start)),
        "allocator": crate::ALLOCATOR_NAME,
    }))
}

/// The inbox's read for an approver, `samples` times (fewer at 100k and
/// up): how many calls the last read listed, and each read's time.
async fn role_scan(run: &ScaleRun, size: usize, governed: &Agent) -> Result<(usize, Vec<Duration>), String> {
    // The inbox's read for an approver: every waiting call of the agent
    // (up to its scan limit) filtered to the role, then the first page.
    let role_samples = run.samples.min(if size >= 100_000 { 10 } else { 30 });
    let mut listed = 0;
    let mut role_times = Vec::with_capacity(role_samples);
    for i in 0..role_samples {
        let roles = [fill::role(i % fill::ROLES)];
        let started = Instant::now();
        let mut calls = governed
            .decisions()
            .pending_for(
                SnapshotQuery {
                    limit: Some(INBOX_SCAN),
                    ..SnapshotQuery::default()
                },
                Access::Caller {
                    principal: Some("approver"),
                    roles: &roles,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        calls.truncate(PAGE);
        role_times.push(started.elapsed());
        listed = calls.len();
    }
    Ok((listed, role_times))
}

/// An approver's first page, `samples` times.
async fn role_page(run: &ScaleRun, governed: &Agent) -> Result<Vec<Duration>, String> {
    // An approver's first page: `pending_for` with a page's limit, as an
    // approval screen asks for it (no inbox totals).
    timed(run.samples, |i| {
        let agent = governed.clone();
        async move {
            let roles = [fill::role(i % fill::ROLES)];
            agent
                .decisions()
                .pending_for(
                    SnapshotQuery {
                        limit: Some(PAGE),
                        ..SnapshotQuery::default()
                    },
                    Access::Caller {
                        principal: Some("approver"),
                        roles: &roles,
                    },
                )
                .await
        }
    })
    .await
}

/// A finished session's audit and a snapshot by id, picked at random,
/// `samples` times each.
async fn store_reads(
    run: &ScaleRun,
    size: usize,
    store: &Arc<dyn SessionStore>,
    templates: &Templates,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let mut picks = Picks(0x9e37_79b9_7f4a_7c15 ^ size as u64);
    let audit = timed(run.samples, |_| {
        let session = templates.finished_session(picks.below(size));
        let store = Arc::clone(store);
        async move {
            store
                .capabilities()
                .audit()?
                .list_audit(&AuditQuery {
                    session_id: Some(session),
                    ..AuditQuery::default()
                })
                .await
        }
    })
    .await?;
    let get = timed(run.samples, |_| {
        let id = templates.snapshot_id(picks.below(size));
        let store = Arc::clone(store);
        async move { store.get_snapshot(&id).await }
    })
    .await?;
    Ok((audit, get))
}

fn store_kind(url: &str) -> &'static str {
    if url.starts_with("sqlite") {
        "sqlite"
    } else if url.starts_with("postgres") {
        "postgres"
    } else {
        "memory"
    }
}

/// Fills and measures at each size; prints one JSON line per size.
pub async fn run(run: ScaleRun) -> Result<(), String> {
    let rss_start = crate::sys::rss_bytes();
    let url = if run.store == "memory" {
        "memory:"
    } else {
        run.store.as_str()
    };
    let store = holdpoint_stores::open_store(url)
        .await
        .map_err(|e| format!("store {}: {e}", run.store))?;
    let (plain, tool) = cycle::setup(Arc::clone(&store)).map_err(|e| e.to_string())?;
    let (governed, governed_tool) = cycle::setup_with_policy(Arc::clone(&store)).map_err(|e| e.to_string())?;
    let templates = Arc::new(Templates::capture(&governed, &governed_tool, &store).await?);
    let plain = drive::Driver::Direct(plain);
    let mut filled = 0;
    for &size in &run.sizes {
        let started = Instant::now();
        templates.fill(&store, filled, size).await?;
        let fill_secs = started.elapsed().as_secs_f64();
        filled = size.max(filled);
        eprintln!("scale: filled {size} sessions in {fill_secs:.1} s; measuring");
        let row = measure(
            &run,
            size,
            &store,
            (&plain, &tool),
            &governed,
            &templates,
            rss_start,
            fill_secs,
        )
        .await?;
        println!("{row}");
    }
    Ok(())
}
