//! The prune step (docs/reference.md §11.4) in one transaction: the walk
//! over sessions, the check of each one's latest row and the deletes commit
//! together or not at all. Each delete takes only a session's rows up to
//! the latest the walk read, so a row another replica writes meanwhile
//! stays.

use holdpoint::Result;
use holdpoint::session::{PruneOutcome, PruneRequest};
use holdpoint_store_sql::prune::{Candidate, audit_where, candidates_sql, snapshots_where};
use holdpoint_store_sql::row::sql_limit;
use sqlx::{PgConnection, PgPool};

use crate::dialect::Postgres;
use crate::error::store_error;

type Walked = (String, String, Option<String>, i64, i64);

/// Runs one prune step (see `PruneStore::prune_sessions`).
pub(crate) async fn step(pool: &PgPool, request: &PruneRequest) -> Result<PruneOutcome> {
    request.check()?;
    let err = |e| store_error("prune sessions", e);
    let mut tx = pool.begin().await.map_err(err)?;
    let walked: Vec<Walked> = sqlx::query_as(sqlx::AssertSqlSafe(candidates_sql(Postgres)))
        .bind(request.after.as_deref().unwrap_or(""))
        .bind(sql_limit(request.batch))
        .fetch_all(&mut *tx)
        .await
        .map_err(err)?;
    let mut outcome = PruneOutcome {
        examined: walked.len() as u64,
        next: (walked.len() >= request.batch)
            .then(|| walked.last().map(|w| w.0.clone()))
            .flatten(),
        ..PruneOutcome::default()
    };
    for (session_id, status, finish_reason, updated_at_ns, created_at_ns) in walked {
        let candidate = Candidate {
            session_id,
            status,
            finish_reason,
            updated_at_ns,
            created_at_ns,
        };
        if !candidate.prunable(request.older_than)? {
            continue;
        }
        outcome.snapshots += run(&mut tx, request.dry_run, &snapshots_where(Postgres), &candidate, true).await?;
        if request.audit {
            outcome.audit_records += run(&mut tx, request.dry_run, &audit_where(Postgres), &candidate, false).await?;
        }
        outcome.sessions += 1;
    }
    tx.commit().await.map_err(err)?;
    Ok(outcome)
}

/// Counts (dry run) or deletes the rows `from` names for `candidate`;
/// `upto` binds the latest row's `created_at_ns` as parameter 2.
async fn run(conn: &mut PgConnection, dry_run: bool, from: &str, candidate: &Candidate, upto: bool) -> Result<u64> {
    let err = |e| store_error(&format!("prune session {}", candidate.session_id), e);
    if dry_run {
        let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!("SELECT count(*) {from}")))
            .bind(&candidate.session_id);
        if upto {
            q = q.bind(candidate.created_at_ns);
        }
        return q.fetch_one(conn).await.map(|n| n as u64).map_err(err);
    }
    let mut q = sqlx::query(sqlx::AssertSqlSafe(format!("DELETE {from}"))).bind(&candidate.session_id);
    if upto {
        q = q.bind(candidate.created_at_ns);
    }
    q.execute(conn).await.map(|r| r.rows_affected()).map_err(err)
}
