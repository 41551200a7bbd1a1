//! The faults: SIGKILL to a random replica at even steps of the creation,
//! its restart a random 0.3–3 s later, and one immediate restart of
//! PostgreSQL halfway.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::Mutex as AsyncMutex;

use crate::infra::{Postgres, Replica};
use crate::shared::Shared;
use crate::{Args, Error};

/// How often progress goes to standard error while holds are created.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// What the chaos did.
#[derive(Debug, Default)]
pub struct Chaos {
    /// Replicas killed.
    pub kills: usize,
    /// Replicas restarted.
    pub restarts: usize,
    /// PostgreSQL restarts.
    pub pg_restarts: usize,
    /// When the last kill happened (leases of its claims lapse after it).
    pub last_kill: Option<Instant>,
    /// Wall-clock nanoseconds of each kill, to read the store's times against.
    pub kill_times_ns: Vec<i64>,
    /// Wall-clock nanoseconds when PostgreSQL was stopped, and when it was up again.
    pub pg_restart_ns: Option<(i64, i64)>,
}

/// Nanoseconds since the Unix epoch now (the store's time unit).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A xorshift generator: the kill schedule is the seed's, not the clock's.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Kills a random running replica each time another `holds / (kills + 1)`
/// holds are created (keeping at least one up), restarts it after a random
/// pause, and restarts PostgreSQL once halfway. Returns once every hold is
/// created (or creation stopped early: then with the kills made so far)
/// and every killed replica is up again.
pub async fn chaos(
    args: &Args,
    shared: &Shared,
    replicas: &Arc<AsyncMutex<Vec<Replica>>>,
    pg: &Postgres,
    http: &reqwest::Client,
) -> Result<Chaos, Error> {
    let mut rng = Rng(args.seed.max(1));
    let mut out = Chaos::default();
    let step = (args.holds / (args.kills + 1)).max(1);
    let mut pending_restarts: Vec<(usize, Instant)> = Vec::new();
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        let created = shared.created.load(Ordering::SeqCst);
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            eprintln!(
                "cluster: {:.0} s: {created}/{} holds created, {} kills, {} PostgreSQL restarts",
                started.elapsed().as_secs_f64(),
                args.holds,
                out.kills,
                out.pg_restarts
            );
        }
        let stopped = shared.stop_creating.load(Ordering::SeqCst);
        let all_created = created >= args.holds;
        if !stopped && args.pg_restart && out.pg_restarts == 0 && (created >= args.holds / 2 || all_created) {
            let before = now_ns();
            pg.restart_immediate()?;
            out.pg_restart_ns = Some((before, now_ns()));
            out.pg_restarts += 1;
        }
        if !stopped && out.kills < args.kills && (created >= step * (out.kills + 1) || all_created) {
            let mut reps = replicas.lock().await;
            let up: Vec<usize> = (0..reps.len()).filter(|i| reps[*i].is_up()).collect();
            if up.len() >= 2 {
                let victim = up[rng.below(up.len() as u64) as usize];
                reps[victim].kill().await?;
                out.kills += 1;
                out.last_kill = Some(Instant::now());
                out.kill_times_ns.push(now_ns());
                let pause = Duration::from_millis(300 + rng.below(2_700));
                pending_restarts.push((victim, Instant::now() + pause));
            }
        }
        let now = Instant::now();
        let due: Vec<usize> = pending_restarts
            .iter()
            .filter(|(_, at)| *at <= now)
            .map(|(i, _)| *i)
            .collect();
        pending_restarts.retain(|(_, at)| *at > now);
        for victim in due {
            let mut reps = replicas.lock().await;
            reps[victim].start(http).await?;
            out.restarts += 1;
        }
        let faults_done = out.kills >= args.kills && (out.pg_restarts > 0 || !args.pg_restart);
        if pending_restarts.is_empty() && (stopped || (all_created && faults_done)) {
            return Ok(out);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
