//! The streaming methods: `SendStreamingMessage` (the task, its text as
//! artifact updates while the model writes, and its last status) and
//! `SubscribeToTask` (the task, then a status update each time the store
//! moves it on, whoever answered). Each SSE `data:` line is a JSON-RPC
//! response whose `result` is a `StreamResponse`; an error is an `error`
//! event carrying a JSON-RPC error response.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::RunOptions;
use holdpoint::message::Role;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::error::RpcError;
use super::task::{self, State as TaskState, View};
use super::{Ctx, Turn, check_output, rpc_json, task_id};
use crate::routes::WAIT_MAX;
use crate::routes::agents::{self as turns, TurnEvent};

/// How often `SubscribeToTask` reads the task.
const POLL: Duration = Duration::from_millis(200);

/// The `custom` key marking a chunk a sub-agent streamed.
const SUBAGENT: &str = "subagent";

/// One SSE frame: a result, or an error.
enum Frame {
    Result(Value),
    Error(RpcError),
}

/// The SSE response of a stream of frames answering request `id`.
fn sse(id: Value, frames: BoxStream<'static, Frame>) -> Response {
    let events = frames.map(move |frame| {
        let event = match frame {
            Frame::Result(result) => {
                Event::default().data(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
            }
            Frame::Error(e) => Event::default().event("error").data(e.response(&id).to_string()),
        };
        Ok::<_, Infallible>(event)
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A `statusUpdate` of the task.
fn status_update(ctx: &Ctx, view: &View) -> Value {
    json!({"statusUpdate": {
        "taskId": view.id.wire(),
        "contextId": view.id.session,
        "status": task::status(&ctx.agent, view),
    }})
}

/// The closing frames of a view: its result artifact, then its status.
fn closing(ctx: &Ctx, view: &View) -> Vec<Frame> {
    let mut out: Vec<Frame> = task::artifacts(view)
        .into_iter()
        .map(|artifact| {
            Frame::Result(json!({"artifactUpdate": {
                "taskId": view.id.wire(),
                "contextId": view.id.session,
                "artifact": artifact,
                "lastChunk": true,
            }}))
        })
        .collect();
    out.push(Frame::Result(status_update(ctx, view)));
    out
}

/// `SendStreamingMessage`.
pub(super) async fn send(ctx: Ctx, id: Value, params: Value) -> Response {
    let prepared = match ctx.prepare(&params).await {
        Ok(p) => p,
        Err(e) => return rpc_json(e.response(&id)),
    };
    let task_id = prepared.id.clone();
    let (input, init, held) = match prepared.turn {
        Turn::Run { input, init, held } => (input, init, held),
        Turn::Approve { .. } => {
            // A quorum approval runs nothing of its own until the quorum
            // is met: its task, as it is then.
            return match ctx.execute(prepared).await {
                Ok(view) => sse(
                    id,
                    futures::stream::iter(vec![Frame::Result(json!({"task": task::task(&ctx.agent, &view)}))]).boxed(),
                ),
                Err(e) => rpc_json(e.response(&id)),
            };
        }
    };
    let conn = match ctx
        .agent
        .connect_with(RunOptions::new(init).context(ctx.caller.request_context()))
        .await
    {
        Ok(c) => c,
        Err(e) => return rpc_json(RpcError::from_core(e).response(&id)),
    };
    let events = turns::drive(&ctx.state, ctx.agent.clone(), conn, *input, ctx.meta());
    let working = json!({"task": {
        "id": task_id.wire(),
        "contextId": task_id.session,
        "status": {
            "state": TaskState::Working.wire(),
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        },
    }});
    let run = Run {
        ctx,
        id: task_id,
        held,
        events,
        streamed: false,
        artifact: format!("reply-{}", super::new_context_id()),
    };
    let rest = futures::stream::unfold(Some(run), |state| async move {
        let mut run = state?;
        match run.events.recv().await {
            Some(TurnEvent::Chunk(chunk)) => {
                let frames = run.text(&chunk);
                Some((frames, Some(run)))
            }
            Some(TurnEvent::Done(result)) => {
                let frames = run.finish(result).await;
                Some((frames, None))
            }
            None => Some((
                vec![Frame::Error(RpcError::internal("the run ended without an output"))],
                None,
            )),
        }
    })
    .flat_map(futures::stream::iter);
    sse(
        id,
        futures::stream::once(async move { Frame::Result(working) })
            .chain(rest)
            .boxed(),
    )
}

/// One streamed run.
struct Run {
    ctx: Ctx,
    id: task::TaskId,
    held: Option<String>,
    events: mpsc::UnboundedReceiver<TurnEvent>,
    /// Whether text went out on the reply artifact already.
    streamed: bool,
    /// The id of the artifact the model's text streams on.
    artifact: String,
}

impl Run {
    /// The model's text of a chunk, as an artifact update.
    fn text(&mut self, chunk: &holdpoint::agent::AgentStreamChunk) -> Vec<Frame> {
        let Some(generated) = &chunk.model_chunk else {
            return Vec::new();
        };
        if generated.role != Some(Role::Model) || generated.custom.as_ref().and_then(|c| c.get(SUBAGENT)).is_some() {
            return Vec::new();
        }
        let text: String = generated.content.iter().filter_map(|p| p.as_text()).collect();
        if text.is_empty() {
            return Vec::new();
        }
        let append = self.streamed;
        self.streamed = true;
        vec![Frame::Result(json!({"artifactUpdate": {
            "taskId": self.id.wire(),
            "contextId": self.id.session,
            "artifact": {"artifactId": self.artifact, "name": "reply", "parts": [{"text": text}]},
            "append": append,
            "lastChunk": false,
        }}))]
    }

    /// The closing frames of the run.
    async fn finish(&mut self, result: Result<holdpoint::agent::AgentOutput, holdpoint::Error>) -> Vec<Frame> {
        let out = match result {
            Ok(out) => out,
            Err(e) => return vec![Frame::Error(RpcError::from_core(e))],
        };
        if let Err(e) = check_output(&out, self.held.as_deref()) {
            return vec![Frame::Error(e)];
        }
        match task::load(&self.ctx.agent, &self.ctx.caller, &self.id).await {
            Ok(view) => closing(&self.ctx, &view),
            Err(e) => vec![Frame::Error(e)],
        }
    }
}

/// What a subscriber is told again when it changes.
fn signature(view: &View) -> (TaskState, Option<String>, usize) {
    (
        view.state,
        view.snapshot.as_ref().map(|s| s.snapshot_id.clone()),
        view.holds.iter().map(|h| h.approvals.len()).sum(),
    )
}

/// `SubscribeToTask`: the task, then its changes until it ends, pauses at
/// new holds, or [`WAIT_MAX`] passes.
pub(super) async fn subscribe(ctx: Ctx, id: Value, params: Value) -> Response {
    let view = match super::required(&params, "id").and_then(task_id) {
        Ok(task) => task::load(&ctx.agent, &ctx.caller, &task).await,
        Err(e) => Err(e),
    };
    let view = match view {
        Ok(v) if v.state.is_terminal() => {
            let e = RpcError::unsupported(format!(
                "task {} is in terminal state {}; there is nothing to subscribe to",
                v.id.wire(),
                v.state.wire()
            ));
            return rpc_json(e.response(&id));
        }
        Ok(v) => v,
        Err(e) => return rpc_json(e.response(&id)),
    };
    let first = Frame::Result(json!({"task": task::task(&ctx.agent, &view)}));
    let start = view.snapshot.as_ref().map(|s| s.snapshot_id.clone());
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    let state = Some((ctx, view, start));
    let rest = futures::stream::unfold(state, move |state| async move {
        let (ctx, last, start) = state?;
        loop {
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(POLL).await;
            let now = match task::load(&ctx.agent, &ctx.caller, &last.id).await {
                Ok(v) => v,
                Err(e) => return Some((vec![Frame::Error(e)], None)),
            };
            if signature(&now) == signature(&last) {
                continue;
            }
            let frames = closing(&ctx, &now);
            let paused_again = now.state == TaskState::InputRequired
                && now.snapshot.as_ref().map(|s| &s.snapshot_id) != start.as_ref();
            let next = (!now.state.is_terminal() && !paused_again).then_some((ctx, now, start));
            return Some((frames, next));
        }
    })
    .flat_map(futures::stream::iter);
    sse(id, futures::stream::once(async move { first }).chain(rest).boxed())
}
