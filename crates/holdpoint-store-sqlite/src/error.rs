//! Classifies `sqlx` and SQLite failures as Holdpoint errors.
//!
//! The rule (SPEC §9, issue "durable stores"): anything that retrying later
//! may fix — a busy or locked database, a disk or I/O error, a full disk, a
//! file that cannot be opened, a closed or exhausted pool — is
//! `UNAVAILABLE`; a row that does not decode, or a constraint that cannot
//! fail unless the schema was tampered with, is `INTERNAL`.

use holdpoint::Error;

/// SQLite primary result codes (the low byte of an extended code).
mod code {
    pub const READONLY: i64 = 8;
    pub const BUSY: i64 = 5;
    pub const LOCKED: i64 = 6;
    pub const NOMEM: i64 = 7;
    pub const IOERR: i64 = 10;
    pub const CORRUPT: i64 = 11;
    pub const FULL: i64 = 13;
    pub const CANTOPEN: i64 = 14;
    pub const PROTOCOL: i64 = 15;
    pub const NOTADB: i64 = 26;
}

/// What kind of failure an `sqlx::Error` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Another writer holds the database (SQLITE_BUSY / SQLITE_LOCKED).
    Busy,
    /// The database cannot be reached or written now (I/O, disk full,
    /// cannot open, pool closed or timed out).
    Unavailable,
    /// Anything else: a bug, or a schema changed behind our back.
    Internal,
}

pub(crate) fn classify(err: &sqlx::Error) -> Kind {
    match err {
        sqlx::Error::Database(db) => {
            let primary = db.code().and_then(|c| c.parse::<i64>().ok()).map(|c| c & 0xff);
            match primary {
                Some(code::BUSY | code::LOCKED) => Kind::Busy,
                Some(
                    code::READONLY
                    | code::NOMEM
                    | code::IOERR
                    | code::CORRUPT
                    | code::FULL
                    | code::CANTOPEN
                    | code::PROTOCOL
                    | code::NOTADB,
                ) => Kind::Unavailable,
                _ => Kind::Internal,
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => Kind::Unavailable,
        _ => Kind::Internal,
    }
}

/// `err`, met while doing `what`, as a Holdpoint error.
pub(crate) fn store_error(what: &str, err: sqlx::Error) -> Error {
    match classify(&err) {
        Kind::Busy => Error::Unavailable(format!(
            "sqlite store: {what}: the database stayed locked by another writer ({err}); retry later"
        )),
        Kind::Unavailable => Error::Unavailable(format!("sqlite store: {what}: {err}")),
        Kind::Internal => Error::Internal(format!("sqlite store: {what}: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_failures_are_unavailable() {
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), Kind::Unavailable);
        assert_eq!(classify(&sqlx::Error::PoolClosed), Kind::Unavailable);
        let err = store_error("read snapshot x", sqlx::Error::PoolClosed);
        assert_eq!(err.status(), holdpoint::Status::Unavailable);
        assert!(err.to_string().starts_with("sqlite store: read snapshot x:"), "{err}");
    }

    #[test]
    fn decode_failures_are_internal() {
        assert_eq!(classify(&sqlx::Error::RowNotFound), Kind::Internal);
        let Err(json) = serde_json::from_str::<serde_json::Value>("{") else {
            panic!("should not parse");
        };
        let err = holdpoint::session::row::corrupt_row("snapshot x", json);
        assert_eq!(err.status(), holdpoint::Status::Internal);
    }
}
