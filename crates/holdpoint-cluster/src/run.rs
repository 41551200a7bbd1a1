//! The run, phase by phase: holds created and answered while the chaos
//! kills and restarts replicas and PostgreSQL; the inbox drained; the
//! leases of the last kills waited out and the calls in doubt settled;
//! the outbox drained; then the ledger check and the summary.
//!
//! Creation stops early when `--create-seconds` runs out, and draining
//! when only the reserve for the later phases is left of `--max-seconds`:
//! the run then checks the holds created so far, with the faults made so
//! far, and says `partial` (holds still waiting answerable are reported,
//! not counted lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approvers::approver;
use crate::chaos::{self, Chaos};
use crate::check::check;
use crate::cluster::Cluster;
use crate::customers::creator;
use crate::plan::{self, APPROVERS};
use crate::settle::settle;
use crate::shared::Shared;
use crate::{Args, Error};

/// A resume's claim lapses this long after its replica died (the default lease, and a margin).
const LEASE: Duration = Duration::from_secs(65);
/// How long the outbox may take to drain after the settlement.
const OUTBOX_WAIT: Duration = Duration::from_secs(120);
/// What the run keeps of `--max-seconds` for the phases after the inbox
/// drained: the lease, the settlement, the outbox and the check.
const RESERVE: Duration = Duration::from_secs(65 + 120 + 60);

/// Runs the whole scenario and returns the summary.
pub async fn run(args: Args) -> Result<Value, Error> {
    let started = Instant::now();
    let cluster = Cluster::start(&args).await?;
    let shared = Arc::new(Shared::new(
        format!("http://{}", cluster.proxy),
        cluster.http.clone(),
        args.holdpoint.clone().unwrap_or_default(),
    ));
    let approvers: Vec<_> = (0..APPROVERS)
        .map(|k| tokio::spawn(approver(Arc::clone(&shared), k)))
        .collect();
    let chaos = create_under_faults(&args, &shared, &cluster, started).await?;
    let created_at = started.elapsed();
    let drain_until = started + Duration::from_secs(args.max_seconds).saturating_sub(RESERVE);
    let drained = drain_inbox(&shared, drain_until).await;
    shared.stop_approvers.store(true, Ordering::SeqCst);
    for a in approvers {
        let _ = a.await;
    }
    let drained_at = started.elapsed();

    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&cluster.pg.url)
        .await?;
    // Calls in doubt: wait out the leases of the last kills, then settle
    // each against the ledger.
    let since_last_kill = chaos.last_kill.map(|t| t.elapsed()).unwrap_or(LEASE);
    if since_last_kill < LEASE {
        tokio::time::sleep(LEASE - since_last_kill).await;
    }
    let settled = settle(&shared, &db).await?;
    drain_outbox(&db).await?;
    let ledger = check(&shared, &db, &cluster.hooks).await?;
    let answers = shared.stats.answers.lock().map(|a| a.clone()).unwrap_or_default();
    let created = shared.created.load(Ordering::SeqCst);
    let summary = json!({
        "clean": ledger["clean"] == json!(true) && settled["failed"] == json!(0),
        "partial": created < args.holds || !drained,
        "inboxDrained": drained,
        "holdsRequested": args.holds,
        "holdsCreated": created,
        "replicas": args.replicas,
        "approvers": APPROVERS,
        "postgresDurableCommits": args.pg_durable,
        "kills": chaos.kills,
        "killsRequested": args.kills,
        "restarts": chaos.restarts,
        "postgresRestarts": chaos.pg_restarts,
        "faultTimesNs": {"kills": chaos.kill_times_ns, "postgresRestart": chaos.pg_restart_ns},
        "createdConfirmed": shared.stats.create_ok.load(Ordering::SeqCst),
        "createUncertain": shared.stats.create_uncertain.load(Ordering::SeqCst),
        "answers": answers,
        "cliAnswers": shared.stats.cli_answers.load(Ordering::SeqCst),
        "inDoubt": settled,
        "ledger": ledger,
        "seconds": {
            "create": created_at.as_secs_f64(),
            "drained": drained_at.as_secs_f64(),
            "total": started.elapsed().as_secs_f64(),
        },
        "workDir": cluster.work.display().to_string(),
    });
    cluster.stop().await;
    Ok(summary)
}

/// Creates the holds with `--creators` customers while the chaos runs;
/// stops creating once `--create-seconds` (counted from `started`) ran out.
async fn create_under_faults(
    args: &Args,
    shared: &Arc<Shared>,
    cluster: &Cluster,
    started: Instant,
) -> Result<Chaos, Error> {
    let next = Arc::new(AtomicUsize::new(0));
    let creators: Vec<_> = (0..args.creators)
        .map(|c| tokio::spawn(creator(Arc::clone(shared), Arc::clone(&next), args.holds, c)))
        .collect();
    let budget = Duration::from_secs(args.create_seconds());
    let timer = {
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            tokio::time::sleep(budget.saturating_sub(started.elapsed())).await;
            shared.stop_creating.store(true, Ordering::SeqCst);
        })
    };
    let chaos = chaos::chaos(args, shared, &cluster.replicas, &cluster.pg, &cluster.http).await;
    for c in creators {
        let _ = c.await;
    }
    timer.abort();
    chaos
}

/// Waits until the inbox has stayed empty for five polls (the approvers
/// answer meanwhile), or `until`; false when the time ran out first.
async fn drain_inbox(shared: &Shared, until: Instant) -> bool {
    let mut empty_polls = 0;
    while empty_polls < 5 {
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let total = match shared
            .http
            .get(format!("{}/inbox?limit=1", shared.proxy))
            .header("x-api-key", plan::approver_key(0))
            .send()
            .await
        {
            Ok(r) => r.json::<Value>().await.ok().and_then(|b| b["result"]["total"].as_u64()),
            Err(_) => None,
        };
        empty_polls = if total == Some(0) { empty_polls + 1 } else { 0 };
    }
    true
}

/// Waits (bounded) until no outbox row is pending delivery.
async fn drain_outbox(db: &sqlx::PgPool) -> Result<(), Error> {
    let deadline = Instant::now() + OUTBOX_WAIT;
    loop {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM holdpoint_outbox WHERE state = 'pending'")
            .fetch_one(db)
            .await?;
        if pending == 0 || Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
