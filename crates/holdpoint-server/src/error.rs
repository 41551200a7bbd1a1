//! [`ApiError`]: every failure the server answers with, and [`http_status`],
//! the one table from a wire [`Status`] to an HTTP status code (docs/reference.md §12).
//!
//! Bodies are always `{"error": {"status": NAME, "message": "…"}}`, also for
//! the failures axum would otherwise answer in plain text (unknown route,
//! wrong method, a body over the size limit, a panic in a handler).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdpoint::{ErrorBody, Status};

/// The HTTP status code for a wire status: the single mapping the server
/// uses (docs/reference.md §12).
///
/// | status | HTTP |
/// |---|---|
/// | `INVALID_ARGUMENT`, `FAILED_PRECONDITION` | 400 |
/// | `UNAUTHENTICATED` | 401 |
/// | `PERMISSION_DENIED` | 403 |
/// | `NOT_FOUND` | 404 |
/// | `ABORTED`, `ALREADY_EXISTS` | 409 |
/// | `RESOURCE_EXHAUSTED` | 429 (413 for a body over the limit, see [`ApiError::payload_too_large`]) |
/// | `CANCELLED` | 499 |
/// | `INTERNAL` | 500 |
/// | `UNAVAILABLE` | 503 |
/// | `DEADLINE_EXCEEDED` | 504 |
pub fn http_status(status: Status) -> StatusCode {
    match status {
        Status::InvalidArgument | Status::FailedPrecondition => StatusCode::BAD_REQUEST,
        Status::Unauthenticated => StatusCode::UNAUTHORIZED,
        Status::PermissionDenied => StatusCode::FORBIDDEN,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::Aborted | Status::AlreadyExists => StatusCode::CONFLICT,
        Status::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        // nginx's "client closed request", as gRPC gateways use it.
        Status::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Status::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Status::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
    }
}

/// A failed request: a wire status, a message for people, and (only for
/// transport-level failures with no status of their own, such as 405 or
/// 413) an explicit HTTP code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    status: Status,
    message: String,
    http: Option<StatusCode>,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            http: None,
        }
    }

    /// `INVALID_ARGUMENT` (400).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Status::InvalidArgument, message)
    }

    /// `NOT_FOUND` (404).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Status::NotFound, message)
    }

    /// `UNAUTHENTICATED` (401).
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(Status::Unauthenticated, message)
    }

    /// `PERMISSION_DENIED` (403).
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(Status::PermissionDenied, message)
    }

    /// `RESOURCE_EXHAUSTED` answered with 413: the body is over the limit.
    pub fn payload_too_large(limit: usize) -> Self {
        ApiError {
            http: Some(StatusCode::PAYLOAD_TOO_LARGE),
            ..Self::new(
                Status::ResourceExhausted,
                format!("request body is larger than the limit of {limit} bytes"),
            )
        }
    }

    /// The same error answered with another HTTP code (transport-level
    /// failures only: 405, 415).
    pub fn with_http(mut self, code: StatusCode) -> Self {
        self.http = Some(code);
        self
    }

    /// The wire status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP code this error is answered with.
    pub fn http_status(&self) -> StatusCode {
        self.http.unwrap_or_else(|| http_status(self.status))
    }

    /// The `{status, message}` body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            status: self.status,
            message: self.message.clone(),
        }
    }
}

impl From<holdpoint::Error> for ApiError {
    fn from(err: holdpoint::Error) -> Self {
        ApiError::new(err.status(), err.to_string())
    }
}

impl From<ErrorBody> for ApiError {
    fn from(body: ErrorBody) -> Self {
        ApiError::new(body.status, body.message)
    }
}

/// The wire status of an error response, kept in the response's
/// extensions for the layers above the handlers (the metrics count errors
/// by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorStatus(pub Status);

/// The `{"error": {…}}` body.
pub(crate) fn error_json(body: &ErrorBody) -> serde_json::Value {
    serde_json::json!({ "error": body })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.http_status();
        tracing::debug!(
            target: "holdpoint_server::rejection",
            status = %self.status,
            http = code.as_u16(),
            message = %self.message,
            "request rejected"
        );
        let mut response = (code, axum::Json(error_json(&self.body()))).into_response();
        response.extensions_mut().insert(ErrorStatus(self.status));
        if self.status == Status::Unauthenticated {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_code() {
        let table = [
            (Status::InvalidArgument, 400),
            (Status::FailedPrecondition, 400),
            (Status::Unauthenticated, 401),
            (Status::PermissionDenied, 403),
            (Status::NotFound, 404),
            (Status::Aborted, 409),
            (Status::AlreadyExists, 409),
            (Status::ResourceExhausted, 429),
            (Status::Cancelled, 499),
            (Status::Internal, 500),
            (Status::Unavailable, 503),
            (Status::DeadlineExceeded, 504),
        ];
        for (status, code) in table {
            assert_eq!(http_status(status).as_u16(), code, "{status}");
        }
        assert_eq!(ApiError::payload_too_large(10).http_status().as_u16(), 413);
    }

    #[test]
    fn core_errors_keep_status_and_message() {
        let e = ApiError::from(holdpoint::Error::Aborted("snapshot s was already resumed".into()));
        assert_eq!(e.status(), Status::Aborted);
        assert_eq!(e.http_status(), StatusCode::CONFLICT);
        assert_eq!(
            error_json(&e.body()),
            serde_json::json!({"error": {"status": "ABORTED", "message": "snapshot s was already resumed"}})
        );
    }
}
