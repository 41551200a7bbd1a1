//! The checks of the writing half of the store: run an update on the row as
//! read and check the result, writing nothing (the writes themselves are
//! queued on a [`Chain`](crate::chain::Chain)).

use holdpoint::Result;
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};

use holdpoint::session::row::{self, AuditColumns, Columns};

/// Runs `update` on the row `existing` (row `id` as read) and checks what
/// it returns, writing nothing: the row to write and its columns, or `None`
/// when the update writes nothing.
pub(crate) fn prepare(
    id: &str,
    existing: Option<String>,
    update: SnapshotUpdate,
) -> Result<Option<(Snapshot, Columns)>> {
    let existing = existing.map(|d| row::decode(id, &d)).transpose()?;
    let Some(next) = update(existing.as_ref())? else {
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
