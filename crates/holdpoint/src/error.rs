//! The one error type of the core, and the gRPC-style status names of the wire.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A status name, as Genkit and gRPC spell them on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// The caller sent something malformed or inconsistent.
    InvalidArgument,
    /// The named session, snapshot or agent does not exist.
    NotFound,
    /// The call is well-formed but not allowed in the current state.
    FailedPrecondition,
    /// A concurrent operation won (for example: already resumed).
    Aborted,
    /// The thing to create exists already.
    AlreadyExists,
    /// The principal may not do this.
    PermissionDenied,
    /// No valid credentials were given.
    Unauthenticated,
    /// A deadline passed before the work finished.
    DeadlineExceeded,
    /// A quota or size limit was hit.
    ResourceExhausted,
    /// The caller cancelled the work.
    Cancelled,
    /// A dependency (store, model provider) is unreachable; retry later.
    Unavailable,
    /// A bug or broken invariant.
    Internal,
}

impl Status {
    /// The wire name, e.g. `INVALID_ARGUMENT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InvalidArgument => "INVALID_ARGUMENT",
            Status::NotFound => "NOT_FOUND",
            Status::FailedPrecondition => "FAILED_PRECONDITION",
            Status::Aborted => "ABORTED",
            Status::AlreadyExists => "ALREADY_EXISTS",
            Status::PermissionDenied => "PERMISSION_DENIED",
            Status::Unauthenticated => "UNAUTHENTICATED",
            Status::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Status::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Status::Cancelled => "CANCELLED",
            Status::Unavailable => "UNAVAILABLE",
            Status::Internal => "INTERNAL",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as it travels on the wire: `{"status": NAME, "message": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The status name.
    pub status: Status,
    /// What went wrong, for people.
    pub message: String,
}

/// Everything that can go wrong in Holdpoint's core.
///
/// Each variant knows its [`Status`]; `Display` is the message the wire shows.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Input that cannot be decoded or violates the wire rules (a part with two
    /// kinds, interrupt data that is not an object, an unknown role, …).
    #[error("{0}")]
    InvalidArgument(String),
    /// A named thing (snapshot, session, tool, agent) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The call is not allowed in the current state (sending after the agent
    /// ended, resuming a pending snapshot, `state` sent to a server-managed agent).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A concurrent operation won: the snapshot was already resumed, or a
    /// compare-and-set lost.
    #[error("{0}")]
    Aborted(String),
    /// The principal may not do this, or signed state did not verify.
    #[error("{0}")]
    PermissionDenied(String),
    /// The work was cancelled.
    #[error("{0}")]
    Cancelled(String),
    /// A dependency is unreachable; retrying later may work.
    #[error("{0}")]
    Unavailable(String),
    /// A tool returned a plain error: the whole generation fails.
    #[error("tool \"{tool}\" failed: {message}")]
    ToolFailed {
        /// The tool's name.
        tool: String,
        /// The tool's error text.
        message: String,
    },
    /// The snapshot was already claimed by another resume (exactly-once
    /// guard, docs/reference.md §7). Status `ABORTED`; HTTP 409.
    #[error("snapshot {0} was already resumed")]
    AlreadyResumed(String),
    /// What the caller sent was already answered, where that is not a
    /// plain stored snapshot: client-held state (whose one-time claim is
    /// kept under an internal marker), or a sub-agent's hold below the
    /// snapshot the caller named. The message names the caller's ids (the
    /// inner ones only as context). Status `ABORTED`; HTTP 409, as
    /// [`AlreadyResumed`](Self::AlreadyResumed).
    #[error("{0}")]
    AlreadyAnswered(String),
    /// A resume left an interrupted tool request without an answer.
    #[error(
        "unresolved tool request \"{name}\" (ref {reference}): every interrupt must be answered with a restart or a respond"
    )]
    UnresolvedToolRequest {
        /// The tool's name.
        name: String,
        /// The request's ref.
        reference: String,
    },
    /// The model asked for tools more often than `max_turns` allows.
    #[error("exceeded maximum tool call iterations ({0})")]
    MaxTurnsExceeded(u32),
    /// The model named a tool the generation does not have.
    #[error("tool \"{0}\" not found")]
    ToolNotFound(String),
    /// An error with an explicit status, e.g. from a model provider or store.
    #[error("{message}")]
    Status {
        /// The status.
        status: Status,
        /// The message.
        message: String,
    },
    /// A new message abandoned the paused calls a resume answers: they
    /// never ran and can no longer be answered. Status `ABORTED`.
    #[error("{0}")]
    Abandoned(String),
    /// A turn ran and failed. The failed
    /// [`AgentOutput`](crate::agent::AgentOutput) (its session,
    /// snapshot id, client-held state, [`FailureReason`](crate::agent::FailureReason) and error body)
    /// rides along; the status and message are the failure's own.
    /// [`Agent::run`](crate::agent::Agent::run), settling and a
    /// [`Connection`](crate::agent::Connection)'s outputs return a failed
    /// turn as this error, so `?` never passes one on as a success.
    /// [`FailedTurn`] derefs to the output.
    #[error("{}", .0.message())]
    TurnFailed(FailedTurn),
    /// The thing to write exists already: a snapshot id or a grant id
    /// that is taken (nothing was written). Status `FAILED_PRECONDITION`
    /// on the wire, as it always was (HTTP 412), though `ALREADY_EXISTS`
    /// names the kind: the wire contract predates the variant.
    #[error("{0}")]
    AlreadyExists(String),
    /// A resume's claim on its snapshot is no longer its own: the lease
    /// lapsed and another process took the claim over, or the outcome of
    /// the takeover was written first. The resume's outcome is not saved.
    /// Status `FAILED_PRECONDITION`, as before the variant existed.
    #[error("{0}")]
    ClaimLost(String),
    /// A store failed; `source` is the driver's own error, kept for
    /// `Error::source` chains and logs (sqlx's `Error::Database` is the
    /// model). The status says what the caller may do (`UNAVAILABLE`:
    /// retry later; `INTERNAL`: a bug or a tampered schema); the message is
    /// what the wire shows.
    #[error("{message}")]
    Store {
        /// The status the failure maps to.
        status: Status,
        /// What failed, for people (the driver's text included).
        message: String,
        /// The driver's error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A configuration needs a capability its session store does not have
    /// (an audit trail, an outbox, standing grants, a listing, pruning).
    /// Raised when the configuration is built (an agent, a server, a
    /// notification worker), never by a store call.
    /// Status `FAILED_PRECONDITION`.
    #[error("{needed_by} needs a session store with {capability}; this store has none")]
    MissingCapability {
        /// The capability's name (`audit`, `outbox`, `grants`, `listing`, `prune`).
        capability: &'static str,
        /// What needs it (an agent, the server, the notification worker).
        needed_by: String,
    },
    /// A broken invariant or an unexpected failure (serialisation, a task panicked).
    #[error("{0}")]
    Internal(String),
}

/// What [`Error::TurnFailed`] needs of a failed turn's output. The error
/// module sits below every other module of the crate, so it does not name
/// the output's type: the agent module implements this for its
/// `AgentOutput`, the one type a [`FailedTurn`] is ever built from.
pub(crate) trait TurnOutput: Any + fmt::Debug + Send + Sync {
    /// The failure's wire error, if the output names one.
    fn error_body(&self) -> Option<&ErrorBody>;
    /// A boxed copy, for `Clone`.
    fn clone_boxed(&self) -> Box<dyn TurnOutput>;
    /// The output as `Any`, to take it back by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send + Sync>;
}

/// A failed turn's output, as [`Error::TurnFailed`] carries it. It derefs
/// to [`AgentOutput`](crate::agent::AgentOutput) (the agent module builds
/// it from one and reads it back).
pub struct FailedTurn(pub(crate) Box<dyn TurnOutput>);

impl FailedTurn {
    /// The failure's message, as `Display` shows it.
    fn message(&self) -> &str {
        self.0.error_body().map_or("the turn failed", |e| e.message.as_str())
    }

    /// The failure's status (`INTERNAL` when the output names no error).
    fn status(&self) -> Status {
        self.0.error_body().map_or(Status::Internal, |e| e.status)
    }
}

impl Clone for FailedTurn {
    fn clone(&self) -> Self {
        FailedTurn(self.0.clone_boxed())
    }
}

impl fmt::Debug for FailedTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Error {
    /// The status this error carries on the wire.
    pub fn status(&self) -> Status {
        match self {
            Error::InvalidArgument(_) => Status::InvalidArgument,
            Error::NotFound(_) | Error::ToolNotFound(_) => Status::NotFound,
            Error::FailedPrecondition(_)
            | Error::AlreadyExists(_)
            | Error::ClaimLost(_)
            | Error::MissingCapability { .. } => Status::FailedPrecondition,
            Error::Store { status, .. } => *status,
            Error::Aborted(_) | Error::AlreadyResumed(_) | Error::AlreadyAnswered(_) => Status::Aborted,
            Error::PermissionDenied(_) => Status::PermissionDenied,
            Error::Cancelled(_) => Status::Cancelled,
            Error::Unavailable(_) => Status::Unavailable,
            Error::ToolFailed { .. } => Status::Internal,
            Error::UnresolvedToolRequest { .. } => Status::InvalidArgument,
            Error::MaxTurnsExceeded(_) => Status::Aborted,
            Error::Status { status, .. } => *status,
            Error::Abandoned(_) => Status::Aborted,
            Error::TurnFailed(out) => out.status(),
            Error::Internal(_) => Status::Internal,
        }
    }

    /// An error with the given status and message.
    pub fn with_status(status: Status, message: impl Into<String>) -> Self {
        Error::Status {
            status,
            message: message.into(),
        }
    }

    /// The `{status, message}` body of this error.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            status: self.status(),
            message: self.to_string(),
        }
    }

    /// A store failure with its driver error kept as the source.
    pub fn store(
        status: Status,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Store {
            status,
            message: message.into(),
            source: Arc::new(source),
        }
    }

    /// Rebuilds an error from its wire body.
    pub fn from_body(body: &ErrorBody) -> Self {
        Error::with_status(body.status, body.message.clone())
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error::InvalidArgument(err.to_string())
    }
}

/// `Result` with Holdpoint's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_serialises_as_wire_name() {
        let body = Error::Aborted("already resumed".into()).body();
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(json, r#"{"status":"ABORTED","message":"already resumed"}"#);
        assert_eq!(Status::FailedPrecondition.as_str(), "FAILED_PRECONDITION");
    }

    #[test]
    fn store_errors_keep_their_source_and_new_kinds_keep_their_wire_status() {
        let io = std::io::Error::other("disk on fire");
        let err = Error::store(Status::Unavailable, "sqlite store: write: disk on fire", io);
        assert_eq!(err.status(), Status::Unavailable);
        assert_eq!(err.to_string(), "sqlite store: write: disk on fire");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk on fire"));
        assert_eq!(Error::AlreadyExists("x".into()).status(), Status::FailedPrecondition);
        assert_eq!(Error::ClaimLost("x".into()).status(), Status::FailedPrecondition);
    }

    #[test]
    fn tool_failure_message_names_tool() {
        let err = Error::ToolFailed {
            tool: "x".into(),
            message: "boom".into(),
        };
        assert_eq!(err.to_string(), "tool \"x\" failed: boom");
        assert_eq!(
            Error::MaxTurnsExceeded(5).to_string(),
            "exceeded maximum tool call iterations (5)"
        );
    }
}
