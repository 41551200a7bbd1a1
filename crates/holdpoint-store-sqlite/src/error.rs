//! Classifies SQLite failures as Holdpoint errors.
//!
//! The rule (docs/reference.md §6.6): anything that retrying later
//! may fix — a busy or locked database, a disk or I/O error, a full disk, a
//! file that cannot be opened, a store that was closed — is `UNAVAILABLE`;
//! a row that does not decode, or a constraint that cannot fail unless the
//! schema was tampered with, is `INTERNAL`.

use holdpoint::{Error, Status};
use rusqlite::ErrorCode;

/// What kind of failure a `rusqlite::Error` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Another writer holds the database (SQLITE_BUSY / SQLITE_LOCKED).
    Busy,
    /// The database cannot be reached or written now (I/O, disk full,
    /// cannot open, read-only, corrupt, not a database).
    Unavailable,
    /// Anything else: a bug, or a schema changed behind our back.
    Internal,
}

pub(crate) fn classify(err: &rusqlite::Error) -> Kind {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Kind::Busy,
        Some(
            ErrorCode::ReadOnly
            | ErrorCode::OutOfMemory
            | ErrorCode::SystemIoFailure
            | ErrorCode::DatabaseCorrupt
            | ErrorCode::DiskFull
            | ErrorCode::CannotOpen
            | ErrorCode::FileLockingProtocolFailed
            | ErrorCode::NotADatabase,
        ) => Kind::Unavailable,
        _ => Kind::Internal,
    }
}

/// `err`, met while doing `what`, as a Holdpoint error.
pub(crate) fn store_error(what: &str, err: rusqlite::Error) -> Error {
    // The driver's error rides along as the source; the status and the
    // message are what the wire shows.
    let (status, message) = match classify(&err) {
        Kind::Busy => (
            Status::Unavailable,
            format!("sqlite store: {what}: the database stayed locked by another writer ({err}); retry later"),
        ),
        Kind::Unavailable => (Status::Unavailable, format!("sqlite store: {what}: {err}")),
        Kind::Internal => (Status::Internal, format!("sqlite store: {what}: {err}")),
    };
    Error::store(status, message, err)
}

/// The store (or its writer or readers) was closed: `UNAVAILABLE`.
pub(crate) fn closed(what: &str) -> Error {
    Error::Unavailable(format!("sqlite store: {what}: the store is closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn busy_and_io_failures_are_unavailable() {
        assert_eq!(classify(&failure(rusqlite::ffi::SQLITE_BUSY)), Kind::Busy);
        assert_eq!(classify(&failure(rusqlite::ffi::SQLITE_IOERR_FSYNC)), Kind::Unavailable);
        assert_eq!(classify(&failure(rusqlite::ffi::SQLITE_FULL)), Kind::Unavailable);
        let err = store_error("read snapshot x", failure(rusqlite::ffi::SQLITE_BUSY));
        assert_eq!(err.status(), holdpoint::Status::Unavailable);
        assert!(err.to_string().starts_with("sqlite store: read snapshot x:"), "{err}");
        assert!(std::error::Error::source(&err).is_some(), "the driver's error is kept");
        assert_eq!(closed("read").status(), holdpoint::Status::Unavailable);
    }

    #[test]
    fn decode_and_constraint_failures_are_internal() {
        assert_eq!(classify(&rusqlite::Error::QueryReturnedNoRows), Kind::Internal);
        assert_eq!(
            classify(&failure(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)),
            Kind::Internal
        );
        let Err(json) = serde_json::from_str::<serde_json::Value>("{") else {
            panic!("should not parse");
        };
        let err = holdpoint_store_sql::row::corrupt_row("snapshot x", json);
        assert_eq!(err.status(), holdpoint::Status::Internal);
    }
}
