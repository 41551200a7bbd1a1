//! `holdpoint-bench`: the approval cycle, measured against the floor.
//!
//! ```text
//! cargo run --release -p holdpoint-bench -- --store memory --n 20000
//! cargo run --release -p holdpoint-bench -- --store memory --paused 10000
//! cargo run --release -p holdpoint-bench -- --concurrency 64 --n 20000
//! cargo run --release -p holdpoint-bench -- --http --concurrency 64 --n 20000
//! ```

mod cycle;
mod scale;
mod sys;

/// mimalloc, as a deployment of the server would run (the default
/// feature); without it, the system allocator. The table names which.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator this build measures with.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system"
};

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use holdpoint::session::{InMemoryStore, SessionStore};
use serde_json::json;

use cycle::CountingStore;

/// Benchmark the pause → approve → resume cycle.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Session store: `memory`, `sqlite:PATH` or `postgres://…`.
    #[arg(long, default_value = "memory")]
    store: String,
    /// Cycles to run.
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Sessions in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Hold this many sessions paused, then resume them all (overrides --n).
    #[arg(long)]
    paused: Option<usize>,
    /// Warm-up cycles before measuring.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Drive the cycle through the HTTP server on loopback (keep-alive).
    #[arg(long)]
    http: bool,
    /// Run the cycle through one sub-agent level: `supportAgent` delegates
    /// to `bankingAgent`, whose hold surfaces and is answered at the root.
    #[arg(long)]
    subagent: bool,
    /// Govern the agent with a one-rule approval policy: a CEL condition
    /// over the transfer's input that matches every call (the rule's
    /// metadata rides on each hold and the claim checks it).
    #[arg(long)]
    policy: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// PostgreSQL: connections in the store's pool (default: the store's
    /// default, 10).
    #[arg(long)]
    pool: Option<u32>,
    /// Fill the store to each of these sizes in turn (comma-separated,
    /// ascending) and measure there (see `scale`): one JSON line per size.
    /// --n cycles per cycle measurement, at 1 and at --concurrency.
    #[arg(long, value_delimiter = ',')]
    scale: Vec<usize>,
    /// Samples per latency measurement of --scale.
    #[arg(long, default_value_t = 200)]
    samples: usize,
}

async fn open_store(url: &str, pool: Option<u32>) -> Result<Arc<dyn SessionStore>, String> {
    match url {
        "memory" | "memory:" => Ok(Arc::new(InMemoryStore::new())),
        pg if pool.is_some() && (pg.starts_with("postgres://") || pg.starts_with("postgresql://")) => {
            let mut options =
                holdpoint_stores::PostgresStoreOptions::new(pg).map_err(|e| format!("store {pg}: {e}"))?;
            if let Some(n) = pool {
                options = options.max_connections(n);
            }
            let store = holdpoint_stores::PostgresStore::connect_with(options)
                .await
                .map_err(|e| format!("store {pg}: {e}"))?;
            Ok(Arc::new(store))
        }
        other => holdpoint_stores::open_store(other)
            .await
            .map_err(|e| format!("store {other}: {e}")),
    }
}

/// Where the store's data lands, for measuring that disk's fsync latency.
fn durable_dir(url: &str) -> Option<std::path::PathBuf> {
    if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
        let p = std::path::Path::new(path);
        return Some(match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => std::path::PathBuf::from("."),
        });
    }
    if url.starts_with("postgres") {
        return Some(std::env::temp_dir());
    }
    None
}

/// The fsync latency of the disk holding `dir` (median of 200 rounds).
fn probe_fsync(dir: &std::path::Path, probe: sys::Probe) -> Result<Duration, String> {
    sys::fsync_latency(dir, 200, probe).map_err(|e| format!("fsync probe ({probe:?}) in {}: {e}", dir.display()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Floor {
    /// The lower of the two probes: the strictest floor.
    fsync: Duration,
    /// The probe before the cycles (disk idle) and after them.
    fsync_before: Duration,
    fsync_after: Duration,
    cycles_per_sec: f64,
    /// A 4 KiB in-place rewrite + fsync after the cycles, and the floor it
    /// gives: stricter than the append probe (no metadata to write).
    overwrite: Duration,
    overwrite_cycles_per_sec: f64,
}

struct Report {
    cycles: usize,
    elapsed: Duration,
    cycle_times: Vec<Duration>,
    resume_times: Vec<Duration>,
    commits: u64,
    bytes_per_paused: Option<f64>,
    floor: Option<Floor>,
}

async fn run_cycles(
    agent: &cycle::Driver,
    tool: &cycle::TransferTool,
    n: usize,
    concurrency: usize,
) -> holdpoint::Result<(Vec<Duration>, Vec<Duration>)> {
    let per_worker = n.div_ceil(concurrency.max(1));
    let mut workers = Vec::new();
    for w in 0..concurrency.max(1) {
        let agent = agent.clone();
        let tool = tool.clone();
        let count = per_worker.min(n.saturating_sub(w * per_worker));
        workers.push(tokio::spawn(async move {
            let mut cycles = Vec::with_capacity(count);
            let mut resumes = Vec::with_capacity(count);
            for _ in 0..count {
                let started = Instant::now();
                let paused = agent.pause().await?;
                resumes.push(agent.approve(&tool, paused).await?);
                cycles.push(started.elapsed());
            }
            Ok::<_, holdpoint::Error>((cycles, resumes))
        }));
    }
    let mut cycles = Vec::with_capacity(n);
    let mut resumes = Vec::with_capacity(n);
    for w in workers {
        let (c, r) = w
            .await
            .map_err(|e| holdpoint::Error::Internal(format!("worker panicked: {e}")))??;
        cycles.extend(c);
        resumes.extend(r);
    }
    Ok((cycles, resumes))
}

/// What the caller keeps of a paused session until it approves it.
enum Held {
    /// The session id only.
    Id(String),
    /// The paused part as the turn returned it.
    Part(Box<cycle::Paused>),
}

async fn run_paused(
    agent: &cycle::Driver,
    tool: &cycle::TransferTool,
    k: usize,
    concurrency: usize,
) -> holdpoint::Result<(Vec<Duration>, f64)> {
    // In process the caller keeps only the session ids (what a ticket or a
    // queue would hold) and reads each waiting call back when approving, so
    // the figure is what the agent and its store keep per paused session.
    // Over HTTP it keeps the paused part the response carried.
    let in_process = matches!(agent, cycle::Driver::Direct(_));
    let before = sys::rss_bytes();
    let mut paused: Vec<Held> = Vec::with_capacity(k);
    for _ in 0..k {
        let p = agent.pause().await?;
        paused.push(if in_process {
            Held::Id(p.session_id)
        } else {
            Held::Part(Box::new(p))
        });
    }
    let after = sys::rss_bytes();
    let per_session = after.saturating_sub(before) as f64 / k.max(1) as f64;
    let chunks: Vec<Vec<Held>> = {
        let mut chunks: Vec<Vec<Held>> = (0..concurrency.max(1)).map(|_| Vec::new()).collect();
        for (i, p) in paused.into_iter().enumerate() {
            chunks[i % concurrency.max(1)].push(p);
        }
        chunks
    };
    let mut workers = Vec::new();
    for chunk in chunks {
        let agent = agent.clone();
        let tool = tool.clone();
        workers.push(tokio::spawn(async move {
            let mut times = Vec::with_capacity(chunk.len());
            for held in chunk {
                let p = match held {
                    Held::Part(p) => *p,
                    Held::Id(id) => agent
                        .reload(id)
                        .await?
                        .ok_or_else(|| holdpoint::Error::Internal("cannot read a paused call back".into()))?,
                };
                times.push(agent.approve(&tool, p).await?);
            }
            Ok::<_, holdpoint::Error>(times)
        }));
    }
    let mut resumes = Vec::with_capacity(k);
    for w in workers {
        resumes.extend(
            w.await
                .map_err(|e| holdpoint::Error::Internal(format!("worker panicked: {e}")))??,
        );
    }
    Ok((resumes, per_session))
}

fn print(args: &Args, r: &Report) {
    let mut cycles = r.cycle_times.clone();
    cycles.sort();
    let mut resumes = r.resume_times.clone();
    resumes.sort();
    let rate = r.cycles as f64 / r.elapsed.as_secs_f64();
    let mean = if cycles.is_empty() {
        0.0
    } else {
        cycles.iter().map(|d| us(*d)).sum::<f64>() / cycles.len() as f64
    };
    let commits = r.commits as f64 / r.cycles.max(1) as f64;
    let peak = sys::peak_rss_bytes();
    if args.json {
        let out = json!({
            "store": args.store,
            "http": args.http,
            "subagent": args.subagent,
            "policy": args.policy,
            "cycles": r.cycles,
            "concurrency": args.concurrency,
            "paused": args.paused,
            "cyclesPerSec": rate,
            "cycleUs": {"mean": mean, "p50": us(percentile(&cycles, 0.5)), "p99": us(percentile(&cycles, 0.99))},
            "resumeUs": {"p50": us(percentile(&resumes, 0.5)), "p99": us(percentile(&resumes, 0.99))},
            "commitsPerCycle": commits,
            "bytesPerPausedSession": r.bytes_per_paused,
            "peakRssBytes": peak,
            "fsyncUs": r.floor.as_ref().map(|f| us(f.fsync)),
            "fsyncBeforeUs": r.floor.as_ref().map(|f| us(f.fsync_before)),
            "fsyncAfterUs": r.floor.as_ref().map(|f| us(f.fsync_after)),
            "floorCyclesPerSec": r.floor.as_ref().map(|f| f.cycles_per_sec),
            "fsyncOverwriteUs": r.floor.as_ref().map(|f| us(f.overwrite)),
            "floorOverwriteCyclesPerSec": r.floor.as_ref().map(|f| f.overwrite_cycles_per_sec),
            "allocator": ALLOCATOR_NAME,
        });
        println!("{out}");
        return;
    }
    println!(
        "holdpoint-bench: store={} cycles={} concurrency={} allocator={ALLOCATOR_NAME}{}",
        args.store,
        r.cycles,
        args.concurrency,
        if args.http {
            " via HTTP (loopback, keep-alive)"
        } else {
            ""
        }
    );
    println!("| metric | value |");
    println!("|---|---|");
    println!("| cycles/s | {rate:.0} |");
    if !cycles.is_empty() {
        println!("| µs per cycle (mean) | {mean:.1} |");
        println!("| µs per cycle (p50) | {:.1} |", us(percentile(&cycles, 0.5)));
        println!("| µs per cycle (p99) | {:.1} |", us(percentile(&cycles, 0.99)));
    }
    println!("| resume latency p50 (µs) | {:.1} |", us(percentile(&resumes, 0.5)));
    println!("| resume latency p99 (µs) | {:.1} |", us(percentile(&resumes, 0.99)));
    println!("| store commits per cycle | {commits:.2} |");
    if let Some(b) = r.bytes_per_paused {
        println!("| bytes per paused session | {b:.0} |");
    }
    if let Some(p) = peak {
        println!("| peak RSS (MiB) | {:.1} |", p as f64 / (1024.0 * 1024.0));
    }
    if let Some(f) = &r.floor {
        println!(
            "| fsync latency, same disk (µs, p50; lower of before / after the cycles) | {:.0} ({:.0} / {:.0}) |",
            us(f.fsync),
            us(f.fsync_before),
            us(f.fsync_after)
        );
        println!(
            "| floor: cycles/s at one fsync per commit, sequential | {:.0} |",
            f.cycles_per_sec
        );
        println!(
            "| share of the floor reached | {:.0}% |",
            100.0 * rate / f.cycles_per_sec
        );
        println!(
            "| fsync latency of a 4 KiB rewrite in place (µs, p50) and its floor (cycles/s) | {:.0}; {:.0} |",
            us(f.overwrite),
            f.overwrite_cycles_per_sec
        );
    }
}

/// Serves `agent` on 127.0.0.1:0 on this runtime; a client with a
/// keep-alive pool of `concurrency` connections. Dropping the sender stops
/// the server.
async fn start_http(
    agent: holdpoint::agent::Agent,
    concurrency: usize,
) -> Result<(cycle::Driver, tokio::sync::oneshot::Sender<()>), String> {
    let name = agent.name().to_owned();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .allow_anonymous(true)
        .build()
        .map_err(|e| format!("server: {e}"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("bind: {e}"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let signal = async move {
            let _ = stopped.await;
        };
        if let Err(e) = holdpoint_server::serve(listener, &server, signal).await {
            eprintln!("server: {e}");
        }
    });
    // Parsed once: a string would be parsed again on every request.
    let uri: http::Uri = format!("http://{addr}/agents/{name}")
        .parse()
        .map_err(|e| format!("uri: {e}"))?;
    let client = cycle::HttpClient::new(uri, concurrency.max(1));
    Ok((cycle::Driver::Http(client), stop))
}

async fn main_async(args: Args) -> Result<(), String> {
    if !args.scale.is_empty() {
        return scale::run(scale::ScaleRun {
            store: args.store,
            sizes: args.scale,
            cycles: args.n,
            samples: args.samples,
            concurrency: args.concurrency,
        })
        .await;
    }
    // The disk's fsync latency is probed before the store opens (nothing of
    // the run pending) and after the cycles; the floor takes the lower.
    let fsync_before = durable_dir(&args.store)
        .map(|dir| probe_fsync(&dir, sys::Probe::Append))
        .transpose()?;
    let counting = Arc::new(CountingStore::new(open_store(&args.store, args.pool).await?));
    let store = Arc::clone(&counting) as Arc<dyn SessionStore>;
    let built = if args.subagent {
        cycle::setup_subagent(store)
    } else if args.policy {
        cycle::setup_with_policy(store)
    } else {
        cycle::setup(store)
    };
    let (agent, tool) = built.map_err(|e| e.to_string())?;
    let (agent, _server) = if args.http {
        let (driver, stop) = start_http(agent, args.concurrency).await?;
        (driver, Some(stop))
    } else {
        (cycle::Driver::Direct(agent), None)
    };
    if args.warmup > 0 && args.paused.is_none() {
        run_cycles(&agent, &tool, args.warmup, args.concurrency)
            .await
            .map_err(|e| format!("warm-up failed: {e}"))?;
    }
    counting.commits.store(0, Ordering::Relaxed);
    let started = Instant::now();
    let report = match args.paused {
        Some(k) => {
            let (resumes, per) = run_paused(&agent, &tool, k, args.concurrency)
                .await
                .map_err(|e| e.to_string())?;
            Report {
                cycles: k,
                elapsed: started.elapsed(),
                cycle_times: Vec::new(),
                resume_times: resumes,
                commits: counting.commits.load(Ordering::Relaxed),
                bytes_per_paused: Some(per),
                floor: None,
            }
        }
        None => {
            let (cycles, resumes) = run_cycles(&agent, &tool, args.n, args.concurrency)
                .await
                .map_err(|e| e.to_string())?;
            Report {
                cycles: cycles.len(),
                elapsed: started.elapsed(),
                cycle_times: cycles,
                resume_times: resumes,
                commits: counting.commits.load(Ordering::Relaxed),
                bytes_per_paused: None,
                floor: None,
            }
        }
    };
    let mut report = report;
    if let (Some(dir), Some(fsync_before)) = (durable_dir(&args.store), fsync_before) {
        let fsync_after = probe_fsync(&dir, sys::Probe::Append)?;
        let fsync = fsync_before.min(fsync_after);
        let overwrite = probe_fsync(&dir, sys::Probe::Rewrite)?;
        let commits = report.commits as f64 / report.cycles.max(1) as f64;
        let floor = |latency: Duration| 1.0 / (commits * latency.as_secs_f64()).max(1e-9);
        report.floor = Some(Floor {
            fsync,
            fsync_before,
            fsync_after,
            cycles_per_sec: floor(fsync),
            overwrite,
            overwrite_cycles_per_sec: floor(overwrite),
        });
    }
    print(&args, &report);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
