//! One write inside the batch's transaction: each [`Op`] read, checked and
//! written, and which failures fail only its caller and which the batch.

use holdpoint::Error;
use holdpoint::session::outbox::decided_events;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate, claim_update, insert_refused};
use holdpoint_store_sql::claim;
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

/// Runs one write inside the batch's transaction.
pub(super) fn apply(conn: &Connection, op: Op) -> std::result::Result<Option<Snapshot>, Fail> {
    match op {
        Op::Save { id, update } => save(conn, &id, update, &[], &[]),
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
            let events = outbox::columns(&decided_events(&claim.snapshot_id, claim.lease_until, &audit))
                .map_err(Fail::Caller)?;
            if !claim.takeover && claim_in_place(conn, &claim, &audit, &events)? {
                return Ok(None);
            }
            let id = claim.snapshot_id.clone();
            save(conn, &id, claim_update(claim), &audit, &events)
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

/// A first claim of a resume without decoding the row: refused when the
/// row is missing (`NOT_FOUND`) or was claimed (`ABORTED`), else the claim
/// is appended to the stored document (see [`claim::with_claim_members`])
/// and written with its audit records. `false` (nothing written) for a
/// document that cannot take it as it is: the caller claims the row whole.
/// Saves the decode and re-encode of the paused row that the general path
/// pays on every resume.
fn claim_in_place(
    conn: &Connection,
    claim: &ResumeClaim,
    audit: &[AuditRecord],
    events: &[OutboxColumns],
) -> std::result::Result<bool, Fail> {
    let id = &claim.snapshot_id;
    let what = || format!("claim snapshot {id}");
    let Some(stored) = write::stored(conn, id).map_err(|e| Fail::Batch(store_error(&what(), e)))? else {
        return Err(Fail::Caller(Error::NotFound(format!("snapshot {id} not found"))));
    };
    if stored.resumed_at_ns.is_some() {
        return Err(Fail::Caller(Error::AlreadyResumed(id.clone())));
    }
    let now = chrono::Utc::now();
    let at_ns = now.timestamp_nanos_opt().ok_or_else(|| {
        Fail::Caller(Error::Internal(format!(
            "the time {now} is outside the range a store can keep"
        )))
    })?;
    let members = claim::claim_members(now, claim.lease_until).map_err(Fail::Caller)?;
    let Some(data) = claim::with_claim_members(&stored.data, &members) else {
        return Ok(false);
    };
    let audit = write::audit_columns(audit).map_err(Fail::Caller)?;
    if !write::claim(conn, id, &data, at_ns).map_err(|e| Fail::Batch(store_error(&what(), e)))? {
        return Err(Fail::Caller(Error::AlreadyResumed(id.clone())));
    }
    write::audit(conn, &audit).map_err(|e| Fail::Batch(store_error(&format!("append audit records of {id}"), e)))?;
    outbox::insert(conn, events).map_err(|e| Fail::Batch(store_error(&format!("append outbox events of {id}"), e)))?;
    Ok(true)
}

/// Reads row `id`, runs `update` and checks the result together with the
/// `audit` records; only then writes the row, the records, the claim's
/// outbox `events` and those of a new hold.
fn save(
    conn: &Connection,
    id: &str,
    update: SnapshotUpdate,
    audit: &[AuditRecord],
    events: &[OutboxColumns],
) -> std::result::Result<Option<Snapshot>, Fail> {
    let what = || format!("save snapshot {id}");
    let stored = write::stored(conn, id).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    let was_waiting = stored.as_ref().is_some_and(write::Stored::is_waiting);
    let prepared = write::prepare(id, stored.as_ref(), update).map_err(Fail::Caller)?;
    let audit = write::audit_columns(audit).map_err(Fail::Caller)?;
    let held = match &prepared {
        Some((row, _)) => {
            outbox::columns(&holdpoint::session::outbox::hold_events(was_waiting, row)).map_err(Fail::Caller)?
        }
        None => Vec::new(),
    };
    outbox::insert(conn, events).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    outbox::insert(conn, &held).map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    let row = match prepared {
        Some((row, cols)) => {
            let written = match &stored {
                Some(old) => write::update(conn, old, &cols),
                None => write::upsert(conn, &cols),
            };
            written.map_err(|e| Fail::Batch(store_error(&what(), e)))?;
            Some(row)
        }
        None => None,
    };
    write::audit(conn, &audit).map_err(|e| Fail::Batch(store_error(&format!("append audit records of {id}"), e)))?;
    Ok(row)
}
