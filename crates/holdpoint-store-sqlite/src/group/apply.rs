//! One write inside the batch's transaction: each [`Op`] read, checked and
//! written, and which failures fail only its caller and which the batch.

use holdpoint::Error;
use holdpoint::session::outbox::{OutboxWrites, decided_events};
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, insert_refused};
use holdpoint_store_sql::outbox::OutboxColumns;
use holdpoint_store_sql::row::Columns;
use rusqlite::Connection;

use super::{Op, control};
use crate::error::store_error;
use crate::{outbox, write};

/// Why one write of a batch failed.
pub(super) enum Fail {
    /// Its update or its check failed before it wrote anything: only its
    /// caller hears of it.
    Caller(Error),
    /// SQLite failed while reading or writing: the transaction is not to be
    /// trusted, and the whole batch fails with it.
    Batch(Error),
}

/// A refusal of one write (a failed update or check, an unclaimable row)
/// fails only its caller.
impl From<Error> for Fail {
    fn from(err: Error) -> Self {
        Fail::Caller(err)
    }
}

/// Runs one write inside the batch's transaction.
pub(super) fn apply(conn: &Connection, op: Op, writes: OutboxWrites) -> std::result::Result<Option<Snapshot>, Fail> {
    match op {
        Op::Save { id, update } => save(conn, &id, update, &[], writes),
        Op::Insert { row, cols, events } => {
            let what = || format!("save snapshot {}", cols.snapshot_id);
            if !write::insert(conn, &cols).map_err(|e| Fail::Batch(store_error(&what(), e)))? {
                return Err(Fail::Caller(insert_refused(&cols.snapshot_id)));
            }
            outbox::insert(conn, &events).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
            Ok(Some(*row))
        }
        Op::InsertAll { rows } => insert_all(conn, &rows).map(|()| None),
        Op::Claim { claim, audit } => {
            let events = outbox::columns(&decided_events(&claim.snapshot_id, claim.lease_until, &audit), writes)
                .map_err(Fail::Caller)?;
            super::claim::run(conn, claim, &audit, events, writes).map(|()| None)
        }
        Op::Outbox(run) => {
            let savepoint =
                |sql: &str| control(conn, sql).map_err(|e| Fail::Batch(store_error("run an outbox write", e)));
            savepoint("SAVEPOINT holdpoint_outbox")?;
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(conn)));
            if !matches!(ran, Ok(Ok(()))) {
                savepoint("ROLLBACK TO holdpoint_outbox")?;
            }
            savepoint("RELEASE holdpoint_outbox")?;
            Ok(None)
        }
        Op::Audit { records } => {
            let cols = write::audit_columns(&records).map_err(Fail::Caller)?;
            write::audit(conn, &cols).map_err(|e| Fail::Batch(store_error("append audit records", e)))?;
            Ok(None)
        }
    }
}

/// Every row or none, inside a savepoint: the first id found taken undoes
/// the rows inserted before it and fails only this write's caller.
fn insert_all(conn: &Connection, rows: &[(Columns, Vec<OutboxColumns>)]) -> std::result::Result<(), Fail> {
    let step = |sql: &str| control(conn, sql).map_err(|e| Fail::Batch(store_error("insert snapshots", e)));
    step("SAVEPOINT holdpoint_insert_all")?;
    for (cols, events) in rows {
        let what = || format!("save snapshot {}", cols.snapshot_id);
        let inserted = write::insert(conn, cols).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
        if !inserted {
            step("ROLLBACK TO holdpoint_insert_all")?;
            step("RELEASE holdpoint_insert_all")?;
            return Err(Fail::Caller(insert_refused(&cols.snapshot_id)));
        }
        outbox::insert(conn, events).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    }
    step("RELEASE holdpoint_insert_all")
}

/// Reads row `id`, runs `update` and checks the result; only then writes
/// the row and the outbox rows of a new hold.
pub(super) fn save(
    conn: &Connection,
    id: &str,
    update: SnapshotUpdate,
    audit: &[AuditRecord],
    writes: OutboxWrites,
) -> std::result::Result<Option<Snapshot>, Fail> {
    let what = || format!("save snapshot {id}");
    let stored = write::stored(conn, id).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    let was_waiting = stored.as_ref().is_some_and(write::Stored::is_waiting);
    let Some((row, cols)) = write::prepare(id, stored.as_ref(), update).map_err(Fail::Caller)? else {
        return Ok(None);
    };
    let held =
        outbox::columns(&holdpoint::session::outbox::hold_events(was_waiting, &row), writes).map_err(Fail::Caller)?;
    let audit = write::audit_columns(audit).map_err(Fail::Caller)?;
    let written = match &stored {
        Some(old) => write::update(conn, old, &cols),
        None => write::upsert(conn, &cols),
    };
    written.map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    outbox::insert(conn, &held).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    write::audit(conn, &audit).map_err(|e| Fail::Batch(store_error(&format!("append audit records of {id}"), e)))?;
    Ok(Some(row))
}
