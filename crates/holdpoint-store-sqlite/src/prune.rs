//! The prune step (docs/reference.md §11.4) on the writer's connection,
//! inside its `BEGIN IMMEDIATE` transaction: the walk, the check of each
//! session's latest row and the deletes see one state of the file, and no
//! other write interleaves.

use holdpoint::Result;
use holdpoint::session::{PruneOutcome, PruneRequest};
use holdpoint_store_sql::prune::{Candidate, audit_where, candidates_sql, snapshots_where};
use holdpoint_store_sql::row::sql_limit;
use rusqlite::{Connection, params};

use crate::dialect::Sqlite;
use crate::error::store_error;

/// Runs one prune step (see `PruneStore::prune_sessions`).
pub(crate) fn step(conn: &Connection, request: &PruneRequest) -> Result<PruneOutcome> {
    let after = request.after.as_deref().unwrap_or("");
    let walked: Vec<Candidate> = conn
        .prepare_cached(&candidates_sql(Sqlite))
        .and_then(|mut s| {
            s.query_map(params![after, sql_limit(request.batch)], |r| {
                Ok(Candidate {
                    session_id: r.get(0)?,
                    status: r.get(1)?,
                    finish_reason: r.get(2)?,
                    updated_at_ns: r.get(3)?,
                    created_at_ns: r.get(4)?,
                })
            })?
            .collect()
        })
        .map_err(|e| store_error("walk sessions to prune", e))?;
    let mut outcome = PruneOutcome {
        examined: walked.len() as u64,
        next: (walked.len() >= request.batch)
            .then(|| walked.last().map(|c| c.session_id.clone()))
            .flatten(),
        ..PruneOutcome::default()
    };
    let (rows, audit) = (snapshots_where(Sqlite), audit_where(Sqlite));
    for candidate in &walked {
        if !candidate.prunable(request.older_than)? {
            continue;
        }
        let what = format!("prune session {}", candidate.session_id);
        let session = candidate.session_id.as_str();
        let run = |verb: &str, from: &str, params: &[&dyn rusqlite::ToSql]| -> Result<u64> {
            let sql = format!("{verb} {from}");
            let n = if request.dry_run {
                conn.prepare_cached(&sql)
                    .and_then(|mut s| s.query_row(params, |r| r.get::<_, i64>(0)))
                    .map(|n| n as u64)
            } else {
                conn.prepare_cached(&sql)
                    .and_then(|mut s| s.execute(params))
                    .map(|n| n as u64)
            };
            n.map_err(|e| store_error(&what, e))
        };
        let verb = if request.dry_run { "SELECT count(*)" } else { "DELETE" };
        outcome.snapshots += run(verb, &rows, &[&session, &candidate.created_at_ns])?;
        if request.audit {
            outcome.audit_records += run(verb, &audit, &[&session])?;
        }
        outcome.sessions += 1;
    }
    Ok(outcome)
}
