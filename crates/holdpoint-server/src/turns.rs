//! Driving one turn of an HTTP request: the turn runs in its own task, so
//! a caller that goes away (a closed tab, a dropped SSE stream) cancels
//! nothing — the agent finishes, persists, and the shutdown tracker waits
//! for it.

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, AgentStreamChunk, Connection};
use holdpoint::session::SnapshotStatus;
use holdpoint::{ErrorBody, FinishReason, Status};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;
use crate::inflight::TurnGuard;
use crate::metrics::TurnMeta;
use crate::state::AppState;

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
/// `init` names; init errors come back as errors, a failed turn as a
/// failed output.
pub(crate) async fn run_once(
    state: &AppState,
    agent: Agent,
    input: AgentInput,
    init: AgentInit,
    context: Map<String, Value>,
    meta: TurnMeta,
) -> Result<AgentOutput, ApiError> {
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
) -> Result<AgentOutput, ApiError>
where
    F: FnOnce(Agent) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = holdpoint::Result<AgentOutput>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let guard: TurnGuard = state.turns().begin();
    let metrics = state.metrics().clone();
    tokio::spawn(async move {
        // A failed turn is answered as Genkit's failed output.
        let out = turn(agent.clone()).await.or_else(holdpoint::Error::into_failed_output);
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
    match rx.await {
        Ok(out) => out.map_err(ApiError::from),
        Err(_) => Err(ApiError::new(Status::Internal, "the turn ended without an output")),
    }
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
