//! An opt-in ledger of executed transfers, for checking exactly-once from
//! outside (the cluster run of `crates/holdpoint-cluster`).
//!
//! With `BANKING_LEDGER_URL=postgres://…` set, every approved
//! `transferMoney` that runs appends one row to the table `banking_ledger`
//! of that database (created on first use) before it reports success: the
//! destination account, the amount in cents and the process that ran it.
//! Each execution has an id of its own, and a write that is retried after a
//! lost connection reuses it, so one execution is one row and a transfer
//! that ran twice is two rows. Unset (the default), nothing is written.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::OnceCell;

use crate::Transfer;

/// The environment variable naming the ledger's PostgreSQL database.
pub const LEDGER_URL_VAR: &str = "BANKING_LEDGER_URL";

/// The table each executed transfer is appended to.
pub const LEDGER_TABLE: &str = "banking_ledger";

/// How long a write keeps retrying while the database is unreachable
/// (a restart of PostgreSQL takes seconds).
const RETRY_FOR: Duration = Duration::from_secs(90);

const CREATE: &str = "CREATE TABLE IF NOT EXISTS banking_ledger (
    execution_id TEXT PRIMARY KEY,
    to_account TEXT NOT NULL,
    amount_cents BIGINT NOT NULL,
    pid INTEGER NOT NULL,
    executed_at TIMESTAMPTZ NOT NULL DEFAULT now())";

/// Why a transfer could not be written to the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database refused or could not be reached for 90 seconds.
    #[error("the ledger could not be written: {0}")]
    Database(#[from] sqlx::Error),
}

static POOL: OnceCell<Option<PgPool>> = OnceCell::const_new();
static SEQ: AtomicU64 = AtomicU64::new(0);
static CREATED: AtomicBool = AtomicBool::new(false);

async fn pool() -> Result<Option<&'static PgPool>, LedgerError> {
    let pool = POOL
        .get_or_try_init(|| async {
            let Some(url) = std::env::var(LEDGER_URL_VAR).ok().filter(|u| !u.is_empty()) else {
                return Ok::<_, LedgerError>(None);
            };
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(5))
                .connect_lazy(&url)?;
            Ok(Some(pool))
        })
        .await?;
    Ok(pool.as_ref())
}

/// Appends one executed transfer to the ledger when [`LEDGER_URL_VAR`] is
/// set (else does nothing), retrying a lost connection with the same
/// execution id for up to 90 seconds.
pub async fn record(t: &Transfer) -> Result<(), LedgerError> {
    let Some(pool) = pool().await? else {
        return Ok(());
    };
    let pid = std::process::id();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let id = format!("{pid}-{nanos}-{}", SEQ.fetch_add(1, Ordering::Relaxed));
    let cents = (t.amount * 100.0).round() as i64;
    let started = Instant::now();
    let mut wait = Duration::from_millis(50);
    loop {
        match write(pool, &id, &t.to_account, cents, pid).await {
            Ok(()) => return Ok(()),
            Err(_) if started.elapsed() < RETRY_FOR => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn write(pool: &PgPool, id: &str, to: &str, cents: i64, pid: u32) -> Result<(), sqlx::Error> {
    if !CREATED.load(Ordering::Acquire) {
        sqlx::query(CREATE).execute(pool).await?;
        CREATED.store(true, Ordering::Release);
    }
    sqlx::query(
        "INSERT INTO banking_ledger (execution_id, to_account, amount_cents, pid) VALUES ($1, $2, $3, $4)
         ON CONFLICT (execution_id) DO NOTHING",
    )
    .bind(id)
    .bind(to)
    .bind(cents)
    .bind(pid as i32)
    .execute(pool)
    .await?;
    Ok(())
}
