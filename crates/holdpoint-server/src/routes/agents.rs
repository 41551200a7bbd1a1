//! `POST /agents/{name}`: one turn, answered as JSON or streamed as SSE;
//! and how every route that runs a turn (AG-UI, A2A, settle) drives it.
//!
//! A turn runs in its own task, so a caller that goes away (a closed tab,
//! a dropped SSE stream) cancels nothing: the agent finishes, persists,
//! and the shutdown tracker waits for it. The core's result is turned into
//! the wire's once, on the way out ([`reply_to`]): a failed turn is
//! Genkit's 200 failed output, but a resume that lost its claim is a 409
//! and a refused answer a 403, with nothing of the turn run or written.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, AgentStreamChunk, Connection};
use holdpoint::session::SnapshotStatus;
use holdpoint::{ErrorBody, FinishReason, Status};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::auth::Caller;
use crate::envelope::{ApiJson, ApiPath, ApiQuery, RunRequest, reply};
use crate::error::ApiError;
use crate::inflight::TurnGuard;
use crate::metrics::TurnMeta;
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunQuery {
    #[serde(default)]
    stream: Option<String>,
}

/// `?stream=true` or `Accept: text/event-stream`.
fn wants_stream(query: &RunQuery, headers: &HeaderMap) -> Result<bool, ApiError> {
    if let Some(v) = &query.stream {
        return match v.as_str() {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(ApiError::invalid(format!(
                "query parameter `stream` must be true or false, got {other:?}"
            ))),
        };
    }
    Ok(headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream")))
}

/// Runs one turn: `{"data": AgentInput, "init": AgentInit?}` →
/// `{"result": AgentOutput}` (a failed turn is still 200; a resume that
/// lost the exactly-once claim is 409), or SSE frames when streaming.
pub(crate) async fn run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<RunQuery>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<RunRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    let stream = wants_stream(&query, &headers)?;
    let init = request.init.unwrap_or_default();
    let meta = TurnMeta {
        agent: agent.name().to_owned(),
    };
    if stream {
        // Refused before the connection opens, so a malformed input is a
        // 400 rather than an error frame (`run_with` checks its own).
        request.data.validate()?;
        let conn = agent
            .connect_with(holdpoint::agent::RunOptions::new(init).context(caller.request_context()))
            .await?;
        let events = drive(&state, agent, conn, request.data, meta);
        let frames =
            frames(events).map(|frame| Ok::<_, std::convert::Infallible>(Event::default().data(frame.to_string())));
        let mut response = Sse::new(frames)
            .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
            .into_response();
        response
            .headers_mut()
            .insert("x-accel-buffering", HeaderValue::from_static("no"));
        return Ok(response);
    }
    let out = run_once(&state, agent, request.data, init, caller.request_context(), meta).await;
    Ok(reply_to(out))
}

/// The wire's answer to a turn's result, decided once: its output (a
/// failed turn's too, as Genkit's 200 failed output), a 409 for a resume
/// that lost its claim and a 403 for a refused answer (see
/// [`claim_conflict`]), else the error's own status.
pub(crate) fn reply_to(result: holdpoint::Result<AgentOutput>) -> Response {
    match result {
        Ok(out) => reply(out).into_response(),
        Err(holdpoint::Error::TurnFailed(failed)) => match claim_conflict(&failed) {
            Some(err) => ApiError::from(err.clone()).into_response(),
            None => reply(failed.into_output()).into_response(),
        },
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// What a driven turn reports.
#[derive(Debug)]
pub(crate) enum TurnEvent {
    /// A streamed chunk.
    Chunk(AgentStreamChunk),
    /// The run's output (or why there is none).
    Done(Result<AgentOutput, holdpoint::Error>),
}

/// The error of an output whose resume lost the race for its paused
/// calls (already resumed, abandoned, left behind: see
/// [`holdpoint::agent::FailureReason::is_conflict`]), answered 409 rather
/// than 200; or was refused because the caller may not give the answer
/// ([`holdpoint::agent::FailureReason::Refused`]), answered 403 naming the
/// rule. Either way nothing of the turn ran or was written. (A resume that
/// does not fit or validate stays Genkit's 200 failed output, with
/// `INVALID_ARGUMENT` and nothing written.)
pub(crate) fn claim_conflict(out: &AgentOutput) -> Option<&ErrorBody> {
    out.failure
        .is_some_and(|f| f.is_conflict() || f == holdpoint::agent::FailureReason::Refused)
        .then_some(out.error.as_ref())
        .flatten()
}

/// Waits until a detached run's snapshot leaves `pending`/`aborting`.
async fn settled(agent: &Agent, snapshot_id: &str) {
    let Some(store) = agent.store() else { return };
    let Ok(mut statuses) = store.watch_status(snapshot_id).await else {
        return;
    };
    while let Some(status) = statuses.next().await {
        if !matches!(status, SnapshotStatus::Pending | SnapshotStatus::Aborting) {
            return;
        }
    }
}

/// Sends `input` on `conn` in a task of its own and reports its chunks and
/// its output.
pub(crate) fn drive(
    state: &AppState,
    agent: Agent,
    conn: Connection,
    input: AgentInput,
    meta: TurnMeta,
) -> mpsc::UnboundedReceiver<TurnEvent> {
    let (tx, rx) = mpsc::unbounded_channel();
    let guard: TurnGuard = state.turns().begin();
    let metrics = state.metrics().clone();
    tokio::spawn(async move {
        if let Err(e) = conn.send(input) {
            conn.cancel();
            let _ = tx.send(TurnEvent::Done(Err(e)));
            drop(guard);
            return;
        }
        let mut chunks = conn.receive();
        while let Some(chunk) = chunks.next().await {
            let _ = tx.send(TurnEvent::Chunk(chunk));
        }
        // A failed turn is answered as Genkit's failed output.
        let out = conn.output().await.or_else(holdpoint::Error::into_failed_output);
        metrics.output(&meta, &out);
        let out = out.map(masked);
        let detached = match &out {
            Ok(o) if o.finish_reason == FinishReason::Detached => o.snapshot_id.clone(),
            _ => None,
        };
        let _ = tx.send(TurnEvent::Done(out));
        if let Some(id) = detached {
            settled(&agent, &id).await;
        }
        drop(guard);
    });
    rx
}

/// `out` as callers read it: the held calls of its message that record a
/// redaction show their input masked (docs/reference.md §22.1); a resume
/// built from them still answers the real calls.
pub(crate) fn masked(mut out: AgentOutput) -> AgentOutput {
    if let Some(message) = out.message.as_mut() {
        holdpoint::review::redact_messages(std::slice::from_mut(message));
    }
    out
}

/// Runs one input without streaming, in a task of its own, on what
/// `init` names: the core's result as it is (a failed turn is
/// `Error::TurnFailed`).
pub(crate) async fn run_once(
    state: &AppState,
    agent: Agent,
    input: AgentInput,
    init: AgentInit,
    context: Map<String, Value>,
    meta: TurnMeta,
) -> holdpoint::Result<AgentOutput> {
    spawn_turn(state, agent, meta, move |agent| async move {
        agent
            .run_with(input, holdpoint::agent::RunOptions::new(init).context(context))
            .await
    })
    .await
}

/// Runs `turn` on `agent` in a task of its own, counted by the shutdown
/// tracker and the metrics, and waits for its output. A detached run is
/// tracked until its snapshot settles.
pub(crate) async fn spawn_turn<F, Fut>(
    state: &AppState,
    agent: Agent,
    meta: TurnMeta,
    turn: F,
) -> holdpoint::Result<AgentOutput>
where
    F: FnOnce(Agent) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = holdpoint::Result<AgentOutput>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let guard: TurnGuard = state.turns().begin();
    let metrics = state.metrics().clone();
    tokio::spawn(async move {
        // A failed turn stays `Error::TurnFailed` (a failed output never
        // carries a message to mask): its caller answers it once.
        let out = turn(agent.clone()).await;
        metrics.output(&meta, &out);
        let out = out.map(masked);
        let detached = match &out {
            Ok(o) if o.finish_reason == FinishReason::Detached => o.snapshot_id.clone(),
            _ => None,
        };
        let _ = tx.send(out);
        if let Some(id) = detached {
            settled(&agent, &id).await;
        }
        drop(guard);
    });
    rx.await
        .unwrap_or_else(|_| Err(holdpoint::Error::Internal("the turn ended without an output".into())))
}

/// The `{"message"}`, `{"result"}` and `{"error"}` frames of a driven turn,
/// as JSON values, ending after the result or error.
pub(crate) fn frames(events: mpsc::UnboundedReceiver<TurnEvent>) -> BoxStream<'static, serde_json::Value> {
    futures::stream::unfold((events, false), |(mut events, done)| async move {
        if done {
            return None;
        }
        let frame = match events.recv().await {
            Some(TurnEvent::Chunk(chunk)) => return Some((serde_json::json!({ "message": chunk }), (events, false))),
            Some(TurnEvent::Done(Ok(out))) => match claim_conflict(&out) {
                Some(err) => serde_json::json!({ "error": err }),
                None => serde_json::json!({ "result": out }),
            },
            Some(TurnEvent::Done(Err(e))) => serde_json::json!({ "error": e.body() }),
            None => serde_json::json!({
                "error": ErrorBody { status: Status::Internal, message: "the turn ended without an output".into() }
            }),
        };
        Some((frame, (events, true)))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_selection() {
        let none = HeaderMap::new();
        let q = |s: &str| RunQuery {
            stream: Some(s.to_owned()),
        };
        assert!(!wants_stream(&RunQuery::default(), &none).unwrap());
        assert!(wants_stream(&q("true"), &none).unwrap());
        assert!(!wants_stream(&q("false"), &none).unwrap());
        assert!(wants_stream(&q("maybe"), &none).is_err());
        let mut sse = HeaderMap::new();
        sse.insert(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(wants_stream(&RunQuery::default(), &sse).unwrap());
    }

    fn failed(error: holdpoint::Error) -> AgentOutput {
        AgentOutput {
            session_id: "s".into(),
            snapshot_id: Some("p".into()),
            finish_reason: FinishReason::Failed,
            message: None,
            artifacts: Vec::new(),
            state: None,
            error: Some(error.body()),
            failure: Some(holdpoint::agent::FailureReason::of(&error)),
            held_for: None,
        }
    }

    #[test]
    fn only_a_lost_claim_is_a_conflict() {
        let lost = failed(holdpoint::Error::AlreadyResumed("p".into()));
        assert_eq!(claim_conflict(&lost).map(|e| e.status), Some(Status::Aborted));
        let abandoned = failed(holdpoint::Error::Abandoned("abandoned".into()));
        assert!(claim_conflict(&abandoned).is_some());
        // The turn limit also carries ABORTED, but is an ordinary failed turn.
        let limit = failed(holdpoint::Error::MaxTurnsExceeded(5));
        assert_eq!(limit.error.as_ref().map(|e| e.status), Some(Status::Aborted));
        assert!(claim_conflict(&limit).is_none());
    }
}
