//! Classifies `sqlx` and PostgreSQL failures as Holdpoint errors.
//!
//! The rule (docs/reference.md §6.6): anything that retrying later
//! may fix — the server down or restarting, a dropped connection, too many
//! connections, a full disk, a lock or statement timeout, a serialisation
//! failure or deadlock — is `UNAVAILABLE`; a bad configuration is
//! `INVALID_ARGUMENT`; a row that does not decode, or any other database
//! error, is `INTERNAL`.

use holdpoint::{Error, Status};

/// What kind of failure an `sqlx::Error` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The database cannot serve the call now; retrying later may work.
    Unavailable,
    /// The connection settings are wrong.
    Config,
    /// Anything else: a bug, or a schema changed behind our back.
    Internal,
}

/// Whether a SQLSTATE code means "try again later".
fn transient(code: &str) -> bool {
    let class = code.get(..2).unwrap_or("");
    matches!(
        class,
        "08" // connection exception
        | "53" // insufficient resources: disk full, out of memory, too many connections
        | "57" // operator intervention: shutdown, crash recovery, query cancelled (timeouts)
        | "58" // system error: I/O
        | "28" // invalid authorisation (wrong or rotated credentials)
        | "3D" // the database does not exist (yet)
    ) || matches!(
        code,
        "40001" // serialization_failure
        | "40P01" // deadlock_detected
        | "55P03" // lock_not_available: lock_timeout passed
        | "55006" // object_in_use
    )
}

pub(crate) fn classify(err: &sqlx::Error) -> Kind {
    match err {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) if transient(&code) => Kind::Unavailable,
            _ => Kind::Internal,
        },
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => Kind::Unavailable,
        sqlx::Error::Configuration(_) => Kind::Config,
        _ => Kind::Internal,
    }
}

/// `err`, met while doing `what`, as a Holdpoint error.
pub(crate) fn store_error(what: &str, err: sqlx::Error) -> Error {
    let hint = match &err {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03") => {
            " (another save held the row past lock_timeout)"
        }
        sqlx::Error::PoolTimedOut => " (no free connection: the pool is exhausted or the server unreachable)",
        _ => "",
    };
    // The driver's error rides along as the source (sqlx's own model);
    // the status and the message are what the wire shows.
    let (status, message) = match classify(&err) {
        Kind::Unavailable => (
            Status::Unavailable,
            format!("postgres store: {what}: {err}{hint}; retry later"),
        ),
        Kind::Config => (Status::InvalidArgument, format!("postgres store: {what}: {err}")),
        Kind::Internal => (Status::Internal, format!("postgres store: {what}: {err}")),
    };
    Error::store(status, message, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes() {
        for code in [
            "08006", "53300", "53100", "57P01", "57014", "55P03", "40001", "40P01", "3D000",
        ] {
            assert!(transient(code), "{code}");
        }
        for code in ["23505", "42P01", "22P02", ""] {
            assert!(!transient(code), "{code}");
        }
    }

    #[test]
    fn pool_failures_are_unavailable() {
        let err = store_error("read snapshot x", sqlx::Error::PoolTimedOut);
        assert_eq!(err.status(), holdpoint::Status::Unavailable);
        assert!(err.to_string().contains("pool is exhausted"), "{err}");
        assert!(std::error::Error::source(&err).is_some(), "the driver's error is kept");
        assert_eq!(classify(&sqlx::Error::RowNotFound), Kind::Internal);
    }
}
