//! Driving one turn of an HTTP request: the turn runs in its own task, so
//! a caller that goes away (a closed tab, a dropped SSE stream) cancels
//! nothing — the agent finishes, persists, and the shutdown tracker waits
//! for it.

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, AgentStreamChunk, Connection};
use holdpoint::session::{Snapshot, SnapshotStatus};
use holdpoint::{ErrorBody, FinishReason, Status};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;
use crate::metrics::TurnMeta;
use crate::shutdown::TurnGuard;
use crate::state::AppState;

/// What a driven turn reports.
#[derive(Debug)]
pub(crate) enum TurnEvent {
    /// A streamed chunk.
    Chunk(AgentStreamChunk),
    /// The run's output (or why there is none).
    Done(Result<AgentOutput, holdpoint::Error>),
}

/// The error of an output whose resume lost the exactly-once claim
/// ("already resumed", `ABORTED`): answered 409 rather than 200. The
/// generate loop's "exceeded maximum tool call iterations" also carries
/// `ABORTED` but is an ordinary failed turn.
pub(crate) fn claim_conflict(out: &AgentOutput) -> Option<&ErrorBody> {
    let err = out.error.as_ref()?;
    (out.finish_reason == FinishReason::Failed
        && err.status == Status::Aborted
        && !err.message.starts_with("exceeded maximum tool call iterations"))
    .then_some(err)
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

/// Runs one input without streaming, in a task of its own, on the
/// snapshot `loaded` when the caller read it already, else on what `init`
/// names; init errors come back as errors, a failed turn as a failed
/// output.
pub(crate) async fn run_once(
    state: &AppState,
    agent: Agent,
    input: AgentInput,
    init: AgentInit,
    loaded: Option<Snapshot>,
    context: Map<String, Value>,
    meta: TurnMeta,
) -> Result<AgentOutput, ApiError> {
    spawn_turn(state, agent, meta, move |agent| async move {
        match loaded {
            Some(snapshot) => agent.run_loaded(snapshot, input, context).await,
            None => agent.run_with_context(input, init, context).await,
        }
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
