//! The writing half of the store: run an update on the row as read and
//! check the result (writing nothing), and the statements that write a
//! checked row or audit records. These run on the writer's thread, inside
//! its transaction (see [`group`](crate::group)).

use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};
use holdpoint::{Error, Result};
use holdpoint_store_sql::row::{self, AuditColumns, Columns};
use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension, params};

/// A row as stored: its JSON and the columns copied out of it (all but the
/// id and the session, which never change).
pub(crate) struct Stored {
    pub data: String,
    parent_id: Option<String>,
    created_at_ns: i64,
    updated_at_ns: i64,
    heartbeat_at_ns: Option<i64>,
    pub resumed_at_ns: Option<i64>,
    status: String,
    finish_reason: Option<String>,
    agent: Option<String>,
    owner: Option<String>,
    approvers: Option<String>,
}

impl Stored {
    /// Whether the stored row waits for an answer (completed, ended
    /// interrupted, never claimed).
    pub fn is_waiting(&self) -> bool {
        self.status == "completed"
            && self.finish_reason.as_deref() == Some("interrupted")
            && self.resumed_at_ns.is_none()
    }
}

/// Row `id` as stored, or `None` when absent.
pub(crate) fn stored(conn: &Connection, id: &str) -> rusqlite::Result<Option<Stored>> {
    conn.prepare_cached(
        "SELECT data, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, resumed_at_ns, \
                status, finish_reason, agent, owner, approvers \
         FROM holdpoint_snapshots WHERE snapshot_id = ?1",
    )?
    .query_row([id], |r| {
        Ok(Stored {
            data: r.get(0)?,
            parent_id: r.get(1)?,
            created_at_ns: r.get(2)?,
            updated_at_ns: r.get(3)?,
            heartbeat_at_ns: r.get(4)?,
            resumed_at_ns: r.get(5)?,
            status: r.get(6)?,
            finish_reason: r.get(7)?,
            agent: r.get(8)?,
            owner: r.get(9)?,
            approvers: r.get(10)?,
        })
    })
    .optional()
}

/// Runs `update` on the row `existing` (row `id` as read) and checks what
/// it returns, writing nothing: the row to write and its columns, or `None`
/// when the update writes nothing. An update that panics fails its own
/// write (`INTERNAL`) and nothing else: it runs inside a batch that other
/// callers' writes share.
pub(crate) fn prepare(
    id: &str,
    existing: Option<&Stored>,
    update: SnapshotUpdate,
) -> Result<Option<(Snapshot, Columns)>> {
    let existing = existing.map(|s| row::decode(id, &s.data)).transpose()?;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| update(existing.as_ref())));
    let updated = ran.map_err(|_| Error::Internal(format!("sqlite store: the update of snapshot {id} panicked")))?;
    let Some(next) = updated? else {
        return Ok(None);
    };
    let row = prepare_row(id, existing.as_ref(), next)?;
    let cols = Columns::of(&row)?;
    Ok(Some((row, cols)))
}

/// The columns of `records`, checked before anything is written.
pub(crate) fn audit_columns(records: &[AuditRecord]) -> Result<Vec<AuditColumns>> {
    records.iter().map(AuditColumns::of).collect()
}

/// Writes a prepared row over the row `old` it replaces, setting only the
/// columns that changed (SQLite then leaves alone every index on the
/// others: a claim rewrites the row and the waiting index, not the five
/// other indexes).
pub(crate) fn update(conn: &Connection, old: &Stored, cols: &Columns) -> rusqlite::Result<()> {
    let changes: [(&str, bool, &dyn ToSql); 10] = [
        ("parent_id", old.parent_id != cols.parent_id, &cols.parent_id),
        (
            "created_at_ns",
            old.created_at_ns != cols.created_at_ns,
            &cols.created_at_ns,
        ),
        (
            "updated_at_ns",
            old.updated_at_ns != cols.updated_at_ns,
            &cols.updated_at_ns,
        ),
        (
            "heartbeat_at_ns",
            old.heartbeat_at_ns != cols.heartbeat_at_ns,
            &cols.heartbeat_at_ns,
        ),
        (
            "resumed_at_ns",
            old.resumed_at_ns != cols.resumed_at_ns,
            &cols.resumed_at_ns,
        ),
        ("status", old.status != cols.status, &cols.status),
        (
            "finish_reason",
            old.finish_reason != cols.finish_reason,
            &cols.finish_reason,
        ),
        ("agent", old.agent != cols.agent, &cols.agent),
        ("owner", old.owner != cols.owner, &cols.owner),
        (
            "approvers",
            old.approvers.as_ref() != Some(&cols.approvers),
            &cols.approvers,
        ),
    ];
    let mut sql = String::from("UPDATE holdpoint_snapshots SET data = ?2");
    let mut args: Vec<&dyn ToSql> = vec![&cols.snapshot_id, &cols.data];
    for (column, _, value) in changes.into_iter().filter(|(_, changed, _)| *changed) {
        args.push(value);
        sql.push_str(&format!(", {column} = ?{}", args.len()));
    }
    sql.push_str(" WHERE snapshot_id = ?1");
    conn.prepare_cached(&sql)?.execute(args.as_slice())?;
    Ok(())
}

/// Writes a prepared row: inserts it, or replaces the row with its id.
pub(crate) fn upsert(conn: &Connection, cols: &Columns) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_snapshots \
           (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
            resumed_at_ns, status, finish_reason, agent, owner, data, approvers) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
         ON CONFLICT (snapshot_id) DO UPDATE SET \
           session_id = excluded.session_id, parent_id = excluded.parent_id, \
           created_at_ns = excluded.created_at_ns, updated_at_ns = excluded.updated_at_ns, \
           heartbeat_at_ns = excluded.heartbeat_at_ns, resumed_at_ns = excluded.resumed_at_ns, \
           status = excluded.status, finish_reason = excluded.finish_reason, \
           agent = excluded.agent, owner = excluded.owner, data = excluded.data, \
           approvers = excluded.approvers",
    )?;
    stmt.execute(row_params(cols).as_slice())?;
    Ok(())
}

/// The first claim of row `?1` in place (see
/// [`holdpoint_store_sql::claim`]): its document `?2` (the stored one with
/// [`with_claim_members`](holdpoint_store_sql::claim::with_claim_members)
/// applied) and `resumed_at_ns` `?3`, the only columns a claim changes,
/// only while unclaimed. One row changed when the claim took, none
/// otherwise.
const CLAIM: &str =
    "UPDATE holdpoint_snapshots SET data = ?2, resumed_at_ns = ?3 WHERE snapshot_id = ?1 AND resumed_at_ns IS NULL";

/// Writes a first claim into row `id` by [`CLAIM`]: its document `data`
/// (with the claim appended) and `resumed_at_ns`, only while the row is
/// unclaimed. `false` (nothing written) when it was claimed.
pub(crate) fn claim(conn: &Connection, id: &str, data: &str, resumed_at_ns: i64) -> rusqlite::Result<bool> {
    let written = conn.prepare_cached(CLAIM)?.execute(params![id, data, resumed_at_ns])?;
    Ok(written == 1)
}

/// Writes a prepared row under an id no row has yet; `false` (nothing
/// written) when one has it.
pub(crate) fn insert(conn: &Connection, cols: &Columns) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_snapshots \
           (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
            resumed_at_ns, status, finish_reason, agent, owner, data, approvers) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
         ON CONFLICT (snapshot_id) DO NOTHING",
    )?;
    let written = stmt.execute(row_params(cols).as_slice())?;
    Ok(written == 1)
}

/// A row's columns as the `?1` – `?13` of [`upsert`] and [`insert`].
fn row_params(cols: &Columns) -> [&dyn ToSql; 13] {
    [
        &cols.snapshot_id,
        &cols.session_id,
        &cols.parent_id,
        &cols.created_at_ns,
        &cols.updated_at_ns,
        &cols.heartbeat_at_ns,
        &cols.resumed_at_ns,
        &cols.status,
        &cols.finish_reason,
        &cols.agent,
        &cols.owner,
        &cols.data,
        &cols.approvers,
    ]
}

/// Appends prepared audit rows, in order.
pub(crate) fn audit(conn: &Connection, records: &[AuditColumns]) -> rusqlite::Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_audit (record_id, at_ns, principal, agent, session_id, snapshot_id, data) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for cols in records {
        stmt.execute(params![
            cols.record_id,
            cols.at_ns,
            cols.principal,
            cols.agent,
            cols.session_id,
            cols.snapshot_id,
            cols.data,
        ])?;
    }
    Ok(())
}
