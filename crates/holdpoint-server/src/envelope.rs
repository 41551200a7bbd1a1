//! The wire envelopes of docs/reference.md §12 — `{"data", "init"}` requests, `{"result"}`
//! and `{"error"}` replies — and the extractors that decode them into
//! [`ApiError`]s that name the problem, instead of axum's plain-text
//! rejections.

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdpoint::Resume;
use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::session::SnapshotStatus;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::limits::{BodyTimeout, Limits};

/// `POST /agents/{name}`: one input, and where the conversation starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The input of the turn.
    pub data: AgentInput,
    /// The session, snapshot or client-held state to continue (absent: a
    /// new conversation).
    #[serde(default)]
    pub init: Option<AgentInit>,
}

/// The `data` of `POST /agents/{name}/getSnapshot`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotRef {
    /// This snapshot.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// The latest snapshot of this session (or, with `snapshotId`, the
    /// session the snapshot must belong to).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Leave the conversation state out of the answer.
    #[serde(default)]
    pub metadata_only: bool,
}

/// `POST /agents/{name}/getSnapshot`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Which snapshot.
    pub data: SnapshotRef,
}

/// The `data` of `POST /agents/{name}/waitForSnapshot`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitRef {
    /// The snapshot to wait for.
    pub snapshot_id: String,
    /// The longest wait in milliseconds (default and cap:
    /// [`WAIT_DEFAULT`](crate::routes::WAIT_DEFAULT),
    /// [`WAIT_MAX`](crate::routes::WAIT_MAX)).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `POST /agents/{name}/waitForSnapshot`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// Which snapshot, and for how long.
    pub data: WaitRef,
}

/// The `data` of `POST /agents/{name}/abort`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortRef {
    /// The snapshot of the detached run to abort.
    pub snapshot_id: String,
}

/// `POST /agents/{name}/abort`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortRequest {
    /// Which run.
    pub data: AbortRef,
}

/// The `data` of `POST /agents/{name}/settle`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleRef {
    /// The snapshot whose resume was left in doubt.
    pub snapshot_id: String,
    /// The answers: `respond` with what the call did, or `restart` to run
    /// it again deliberately.
    pub resume: Resume,
}

/// `POST /agents/{name}/settle`: settle calls left in doubt (docs/reference.md §8).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    /// Which snapshot, and the answers.
    pub data: SettleRef,
}

/// The result of an abort (Genkit's `AgentAbortResponse`, plus the status
/// the snapshot had before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortResult {
    /// The snapshot the abort targeted.
    pub snapshot_id: String,
    /// Its status after the abort (`aborted` for a run that stopped; the
    /// existing status for a settled one).
    pub status: SnapshotStatus,
    /// Its status before the abort.
    pub previous_status: SnapshotStatus,
}

/// The first message of a WebSocket connection.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectInit {
    /// Where the conversation starts (absent: a new one).
    #[serde(default)]
    pub init: Option<AgentInit>,
}

/// A `{"result": …}` reply.
#[derive(Debug, Clone, Serialize)]
pub struct Reply<T> {
    /// The result.
    pub result: T,
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        (StatusCode::OK, axum::Json(self)).into_response()
    }
}

/// `{"result": value}` with status 200.
pub(crate) fn reply<T: Serialize>(result: T) -> Reply<T> {
    Reply { result }
}

/// Decodes JSON text into `T`, naming the path of the first problem
/// (`data.message.role: unknown variant …`).
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Most bodies are fine: decode them directly, and pay for tracking the
    // path only to explain a body that fails.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                ApiError::invalid(format!("request body is not valid JSON: {inner}"))
            }
            _ if path.is_empty() || path == "." => ApiError::invalid(format!("invalid request body: {inner}")),
            _ => ApiError::invalid(format!("invalid request body at `{path}`: {inner}")),
        }
    })?;
    de.end()
        .map_err(|e| ApiError::invalid(format!("request body is not valid JSON: {e}")))?;
    Ok(value)
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A JSON body decoded into `T`: requires `Content-Type: application/json`
/// (which also keeps plain cross-site form posts out), honours the body
/// limit (413), and rejects malformed JSON, wrong types, unknown and
/// missing fields with a 400 that names the problem. A body that does not
/// arrive within the request timeout is a 408 `DEADLINE_EXCEEDED`. The
/// limit and the timeout come from the handler state.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    Limits: FromRef<S>,
    BodyTimeout: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json(content_type) {
            return Err(ApiError::invalid(format!(
                "expected Content-Type: application/json, got {}",
                if content_type.is_empty() { "none" } else { content_type }
            ))
            .with_http(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        }
        let limit = Limits::from_ref(state).body;
        let read = Bytes::from_request(req, state);
        let read = match BodyTimeout::from_ref(state).0 {
            Some(timeout) => tokio::time::timeout(timeout, read).await.map_err(|_| {
                ApiError::new(
                    holdpoint::Status::DeadlineExceeded,
                    format!("the request body did not arrive within {} ms", timeout.as_millis()),
                )
                .with_http(StatusCode::REQUEST_TIMEOUT)
            })?,
            None => read.await,
        };
        let bytes = read.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(limit)
            } else {
                ApiError::invalid(format!("could not read the request body: {}", rejection.body_text()))
            }
        })?;
        if bytes.is_empty() {
            return Err(ApiError::invalid("request body is empty; expected a JSON object"));
        }
        decode_json(&bytes).map(ApiJson)
    }
}

/// A query string decoded into `T`, with a JSON 400 on failure.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e| ApiError::invalid(format!("invalid query string: {}", e.body_text())))
    }
}

/// A path parameter decoded into `T`, with a JSON 400 on failure.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| ApiError::invalid(format!("invalid path: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_problem() {
        let e = decode_json::<RunRequest>(br#"{"data": {"message": {"role": "bot", "content": []}}}"#).unwrap_err();
        assert!(e.message().contains("data.message.role"), "{}", e.message());
        let e = decode_json::<RunRequest>(br#"{"init": {}}"#).unwrap_err();
        assert!(e.message().contains("missing field `data`"), "{}", e.message());
        let e = decode_json::<RunRequest>(br#"{"data": {}, "init": {"sesionId": "x"}}"#).unwrap_err();
        assert!(e.message().contains("unknown field `sesionId`"), "{}", e.message());
        assert!(e.message().contains("init"), "{}", e.message());
        let e = decode_json::<RunRequest>(br#"{"data": {"detach": "yes"}}"#).unwrap_err();
        assert!(e.message().contains("data.detach"), "{}", e.message());
        let e = decode_json::<RunRequest>(br#"{"data": {}"#).unwrap_err();
        assert!(e.message().contains("not valid JSON"), "{}", e.message());
        let e = decode_json::<RunRequest>(br#"{"data": {}} trailing"#).unwrap_err();
        assert!(e.message().contains("not valid JSON"), "{}", e.message());
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/vnd.api+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json(""));
    }
}
