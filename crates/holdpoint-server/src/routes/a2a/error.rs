//! JSON-RPC errors of the A2A endpoint: the codes of the A2A 1.0
//! specification, each with a `google.rpc.ErrorInfo` detail whose
//! `reason` says what Holdpoint refused (`ALREADY_RESUMED`,
//! `SCHEMA_MISMATCH`, …).

use holdpoint::Status;
use serde_json::{Value, json};

/// JSON-RPC: the body is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a request object.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the parameters are wrong.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed.
const INTERNAL: i64 = -32603;
/// A2A: no such task (or not the caller's).
const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the task cannot be canceled in its state.
const TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A: push notifications are not offered.
const PUSH_NOT_SUPPORTED: i64 = -32003;
/// A2A: the operation is not supported (in this state).
const UNSUPPORTED: i64 = -32004;
/// A2A: the requested protocol version is not spoken.
const VERSION_NOT_SUPPORTED: i64 = -32009;

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub(crate) struct RpcError {
    /// The JSON-RPC code.
    pub(crate) code: i64,
    /// The ErrorInfo reason.
    pub(crate) reason: String,
    /// For people.
    pub(crate) message: String,
}

impl RpcError {
    fn new(code: i64, reason: &str, message: impl Into<String>) -> Self {
        RpcError {
            code,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// The body is not JSON.
    pub(crate) fn parse(message: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, "PARSE_ERROR", message)
    }

    /// Not a JSON-RPC request.
    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, "INVALID_REQUEST", message)
    }

    /// An unknown method.
    pub(crate) fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, "METHOD_NOT_FOUND", format!("no method {method}"))
    }

    /// Wrong parameters, with Holdpoint's reason.
    pub(crate) fn invalid_params(reason: &str, message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, reason, message)
    }

    /// The server failed.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL, "INTERNAL", message)
    }

    /// No such task, or not the caller's.
    pub(crate) fn task_not_found(id: &str) -> Self {
        Self::new(TASK_NOT_FOUND, "TASK_NOT_FOUND", format!("task {id} not found"))
    }

    /// The task cannot be canceled now.
    pub(crate) fn not_cancelable(message: impl Into<String>) -> Self {
        Self::new(TASK_NOT_CANCELABLE, "TASK_NOT_CANCELABLE", message)
    }

    /// Push notifications are not offered.
    pub(crate) fn push_not_supported() -> Self {
        Self::new(
            PUSH_NOT_SUPPORTED,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "this agent sends no push notifications: stream, subscribe or poll the task",
        )
    }

    /// Not supported (in the task's state).
    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Self::new(UNSUPPORTED, "UNSUPPORTED_OPERATION", message)
    }

    /// Another protocol version.
    pub(crate) fn version(asked: &str) -> Self {
        Self::new(
            VERSION_NOT_SUPPORTED,
            "VERSION_NOT_SUPPORTED",
            format!("A2A version {asked} is not supported; this endpoint speaks 1.0"),
        )
    }

    /// A core error: not found is a task not found, the caller's mistakes
    /// invalid parameters, the rest internal.
    pub(crate) fn from_core(e: holdpoint::Error) -> Self {
        let body = e.body();
        Self::from_status(body.status, body.message)
    }

    /// An error of a status and a message.
    pub(crate) fn from_status(status: Status, message: String) -> Self {
        match status {
            Status::NotFound => Self::new(TASK_NOT_FOUND, "NOT_FOUND", message),
            Status::InvalidArgument
            | Status::PermissionDenied
            | Status::FailedPrecondition
            | Status::Aborted
            | Status::AlreadyExists
            | Status::Unauthenticated => Self::new(INVALID_PARAMS, status.as_str(), message),
            _ => Self::new(INTERNAL, status.as_str(), message),
        }
    }

    /// The JSON-RPC error object.
    pub(crate) fn object(&self) -> Value {
        json!({
            "code": self.code,
            "message": self.message,
            "data": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "holdpoint",
                "metadata": {"reason": self.reason},
            }],
        })
    }

    /// The JSON-RPC response carrying it.
    pub(crate) fn response(&self, id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.object()})
    }
}
