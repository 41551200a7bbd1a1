//! The checks every store applies to a row it writes, and the
//! insert-if-absent update behind
//! [`SessionStore::insert_snapshot`](super::SessionStore::insert_snapshot).

use super::snapshot::{Snapshot, SnapshotStatus, SnapshotUpdate};
use crate::error::{Error, Result};

/// The update behind [`SessionStore::insert_snapshot`](super::SessionStore::insert_snapshot): writes `row` when
/// there is no row yet, else fails with [`insert_refused`].
pub fn insert_update(snapshot_id: &str, row: Snapshot) -> SnapshotUpdate {
    let id = snapshot_id.to_owned();
    Box::new(move |existing| match existing {
        Some(_) => Err(insert_refused(&id)),
        None => Ok(Some(row)),
    })
}

/// The error of an [`insert_snapshot`](super::SessionStore::insert_snapshot)
/// whose id is taken ([`Error::AlreadyExists`], `FAILED_PRECONDITION` on
/// the wire).
pub fn insert_refused(snapshot_id: &str) -> Error {
    Error::AlreadyExists(format!("snapshot {snapshot_id} already exists; nothing was written"))
}

/// Checks and completes a row an update returned, for store implementations:
/// sets its id, and refuses a missing or changed session id.
pub fn prepare_row(id: &str, existing: Option<&Snapshot>, mut next: Snapshot) -> Result<Snapshot> {
    if next.session_id.is_empty() {
        return Err(Error::InvalidArgument("a snapshot needs a session id".into()));
    }
    if let Some(old) = existing
        && old.session_id != next.session_id
    {
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} belongs to session {}; its session id cannot change",
            old.session_id
        )));
    }
    next.snapshot_id = id.to_owned();
    if next.status == SnapshotStatus::Expired {
        next.status = SnapshotStatus::Pending;
    }
    Ok(next)
}

/// A fresh id for a snapshot, session, audit row or grant: a UUIDv7,
/// time-ordered (its first 48 bits are the Unix time in milliseconds) so
/// a store's index inserts land at the right edge of its B-tree rather
/// than at random pages, with 74 random bits after (no counter: ids
/// minted within one millisecond are not ordered among themselves, which
/// nothing relies on; the shared counter of `Uuid::now_v7` costs a third
/// more instructions per id).
pub fn mint_id() -> String {
    uuid::Uuid::new_v7(uuid::Timestamp::now(uuid::NoContext)).to_string()
}
