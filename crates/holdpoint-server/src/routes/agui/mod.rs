//! `POST /agents/{name}/agui`: the agent over AG-UI (docs/reference.md,
//! "AG-UI"). The request is AG-UI's `RunAgentInput`; the answer is a
//! Server-Sent Events stream of AG-UI events, one JSON object per `data:`
//! line: `RUN_STARTED`, the run's text and tool-call events, and
//! `RUN_FINISHED` (with the interrupt outcome when the run paused at a
//! hold) or `RUN_ERROR`.
//!
//! The thread is a Holdpoint session (`threadId` = session id). A run
//! without `resume` sends the last user message of `messages`; a run with
//! `resume` answers the open interrupts of the thread's latest snapshot
//! through the ordinary agent run (`AgentInput::resume` on
//! `AgentInit::snapshot`), so the one decision path — rules, roles,
//! quorum, grants, exactly-once — decides it. What the AG-UI contract
//! refuses (a partial resume, an unknown, expired or already answered
//! interrupt, a payload that does not meet its `responseSchema`, new input
//! while interrupts are open) is a `RUN_ERROR` and changes nothing.
//! Authentication, agent scopes and thread visibility are the API's: 401,
//! 403, and 404 for a thread the caller may not see, before any event.

mod events;
mod quorum;
pub(super) mod resume;

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, PendingApproval, RunOptions};
use holdpoint::model::FinishReason;
use holdpoint::session::Snapshot;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use self::events::Translator;
use self::resume::{Refusal, ResumeEntry};
use crate::auth::{Caller, Identity};
use crate::envelope::{ApiJson, ApiPath};
use crate::error::ApiError;
use crate::metrics::TurnMeta;
use crate::routes::agents::{self as turns, TurnEvent, claim_conflict};
use crate::state::AppState;

/// AG-UI's `RunAgentInput`: the fields this endpoint reads (the rest —
/// `tools`, `context`, `state`, `forwardedProps` — is accepted and
/// ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInput {
    thread_id: String,
    run_id: String,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    resume: Option<Vec<ResumeEntry>>,
}

/// The text of an AG-UI message's content: a string, or the `text` of its
/// text parts.
fn text_of(message: &Value) -> Option<String> {
    match message.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

/// The SSE response of a stream of events.
fn sse(events: BoxStream<'static, Value>) -> Response {
    let frames = events.map(|event| Ok::<_, Infallible>(Event::default().data(event.to_string())));
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A run refused before it started: `RUN_STARTED`, then `RUN_ERROR`.
fn refused(thread: &str, run: &str, refusal: &Refusal) -> Response {
    let events = vec![
        events::run_started(thread, run),
        events::run_error(refusal.code, &refusal.message),
    ];
    sse(futures::stream::iter(events).boxed())
}

/// The open holds of `snapshot` (none unless it waits).
fn open_calls(snapshot: &Snapshot) -> Vec<PendingApproval> {
    if snapshot.is_waiting() {
        PendingApproval::of(snapshot)
    } else {
        Vec::new()
    }
}

/// The input schema of the agent's own tool a root-level hold is of.
fn input_schema(agent: &Agent, call: &PendingApproval) -> Option<Value> {
    if !call.path.is_empty() {
        return None;
    }
    agent
        .tool_definitions()
        .iter()
        .find(|d| d.name == call.tool)
        .and_then(|d| d.input_schema.clone())
}

/// The number of model messages in a snapshot's history.
fn models_in(snapshot: Option<&Snapshot>) -> usize {
    snapshot
        .and_then(|s| s.state.as_ref())
        .map_or(0, |s| events::model_messages(&s.messages))
}

/// How a run starts: a turn to drive, or the answer already given (a
/// refusal, or a recorded quorum approval).
// One per run, short-lived: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Start {
    /// Runs a turn: new input, or a resume of the latest snapshot.
    Turn(AgentInput, AgentInit),
    /// Nothing to run: the response is the whole answer.
    Answered(Response),
}

/// The start of a run with `resume`: its entries must answer exactly the
/// open interrupts of the thread's latest snapshot.
async fn start_resume(
    agent: &Agent,
    caller: &Identity,
    latest: Option<&Snapshot>,
    open: &[PendingApproval],
    entries: &[ResumeEntry],
    thread: &str,
    run: &str,
) -> Result<Start, ApiError> {
    let Some(snapshot) = latest else {
        return Err(ApiError::not_found(format!("thread {thread} not found")));
    };
    if open.is_empty() {
        let refusal = nothing_open(agent, caller, entries).await;
        return Ok(Start::Answered(refused(thread, run, &refusal)));
    }
    // An id of an earlier snapshot of this thread: answered before.
    if let Some(old) = entries
        .iter()
        .find(|e| resume::snapshot_of(&e.interrupt_id) != Some(&snapshot.snapshot_id))
    {
        let refusal = nothing_open(agent, caller, std::slice::from_ref(old)).await;
        return Ok(Start::Answered(refused(thread, run, &refusal)));
    }
    let plan = resume::plan(&snapshot.snapshot_id, open, entries, |c| input_schema(agent, c));
    if plan.is_ok()
        && let Some(call) = quorum::single_approval(open, entries)
    {
        let (agent, caller, snapshot) = (agent.clone(), caller.clone(), snapshot.clone());
        let stream = quorum::record(agent, caller, snapshot, call, thread.to_owned(), run.to_owned()).await;
        return Ok(Start::Answered(sse(stream)));
    }
    Ok(match plan {
        Ok(directives) => Start::Turn(
            AgentInput::resume(directives),
            AgentInit::snapshot(snapshot.snapshot_id.clone()),
        ),
        Err(refusal) => Start::Answered(refused(thread, run, &refusal)),
    })
}

/// The start of a run without `resume`: the last message, a user's, on a
/// thread with no open interrupt.
fn start_input(
    latest: Option<&Snapshot>,
    open: &[PendingApproval],
    messages: &[Value],
    thread: &str,
    run: &str,
) -> Start {
    if !open.is_empty() {
        let ids: Vec<String> = latest
            .iter()
            .flat_map(|s| open.iter().map(|c| resume::interrupt_id(&s.snapshot_id, c)))
            .collect();
        let refusal = Refusal {
            code: "INTERRUPTS_PENDING",
            message: format!(
                "thread {thread} has {} open interrupt(s) ({}); answer them with resume before new input",
                ids.len(),
                ids.join(", ")
            ),
        };
        return Start::Answered(refused(thread, run, &refusal));
    }
    let Some(text) = messages
        .last()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(text_of)
    else {
        let refusal = Refusal {
            code: "NO_INPUT",
            message: "nothing to run: the last message is not a user message and there is no resume".into(),
        };
        return Start::Answered(refused(thread, run, &refusal));
    };
    Start::Turn(AgentInput::text(text), AgentInit::session(thread.to_owned()))
}

/// Runs the agent over AG-UI: see the module docs.
pub(crate) async fn run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(input): ApiJson<RunAgentInput>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    if input.thread_id.is_empty() || input.run_id.is_empty() {
        return Err(ApiError::invalid("RunAgentInput needs a threadId and a runId"));
    }
    if agent.store().is_none() {
        return Err(ApiError::new(
            holdpoint::Status::FailedPrecondition,
            format!(
                "agent \"{name}\" keeps no sessions (client-held state); AG-UI threads need a server-managed agent"
            ),
        ));
    }
    let (thread, run) = (input.thread_id.clone(), input.run_id.clone());
    let latest = agent.latest_snapshot(&thread, &caller.caller()).await?;
    let open = latest.as_ref().map(open_calls).unwrap_or_default();
    let start = match &input.resume {
        Some(entries) if !entries.is_empty() => {
            start_resume(&agent, &caller, latest.as_ref(), &open, entries, &thread, &run).await?
        }
        _ => start_input(latest.as_ref(), &open, &input.messages, &thread, &run),
    };
    let (turn, init) = match start {
        Start::Turn(turn, init) => (turn, init),
        Start::Answered(response) => return Ok(response),
    };
    let conn = agent
        .connect_with(RunOptions::new(init).context(caller.request_context()))
        .await?;
    let meta = TurnMeta {
        agent: agent.name().to_owned(),
    };
    let resuming = turn.resume.is_some();
    let turn_events = turns::drive(&state, agent.clone(), conn, turn, meta);
    let translator = Translator::new(models_in(latest.as_ref()), resuming).masking(&agent);
    let stream = Stream {
        agent,
        caller,
        thread,
        run,
        translator,
        events: turn_events,
    };
    Ok(sse(stream.events()))
}

/// Why a resume naming no open interrupt is refused: an answered one is a
/// replay, anything else unknown.
async fn nothing_open(agent: &Agent, caller: &Identity, entries: &[ResumeEntry]) -> Refusal {
    for entry in entries {
        let Some(id) = resume::snapshot_of(&entry.interrupt_id) else {
            continue;
        };
        if let Ok(Some(snapshot)) = agent.snapshot(id, &caller.caller()).await
            && snapshot.resumed_at.is_some()
        {
            return Refusal {
                code: "ALREADY_RESUMED",
                message: format!(
                    "interrupt {} was answered already; a resume runs once",
                    entry.interrupt_id
                ),
            };
        }
    }
    let ids: Vec<&str> = entries.iter().map(|e| e.interrupt_id.as_str()).collect();
    Refusal {
        code: "UNKNOWN_INTERRUPT",
        message: format!("no open interrupt on this thread is named {}", ids.join(", ")),
    }
}

/// One run's stream.
struct Stream {
    agent: Agent,
    caller: Identity,
    thread: String,
    run: String,
    translator: Translator,
    events: mpsc::UnboundedReceiver<TurnEvent>,
}

impl Stream {
    /// The run's AG-UI events, `RUN_STARTED` first and `RUN_FINISHED` or
    /// `RUN_ERROR` last.
    fn events(self) -> BoxStream<'static, Value> {
        let started = events::run_started(&self.thread, &self.run);
        let rest = futures::stream::unfold(Some(self), |state| async move {
            let mut s = state?;
            match s.events.recv().await {
                Some(TurnEvent::Chunk(chunk)) => {
                    let out = s.translator.chunk(&chunk);
                    Some((out, Some(s)))
                }
                Some(TurnEvent::Done(result)) => {
                    let out = s.finish(result).await;
                    Some((out, None))
                }
                None => Some((
                    vec![events::run_error("INTERNAL", "the run ended without an output")],
                    None,
                )),
            }
        })
        .flat_map(futures::stream::iter);
        futures::stream::once(async move { started }).chain(rest).boxed()
    }

    /// The closing events of a run.
    async fn finish(&mut self, result: Result<AgentOutput, holdpoint::Error>) -> Vec<Value> {
        let mut out = Vec::new();
        self.translator.close_text(&mut out);
        let output = match result {
            Ok(output) => output,
            Err(e) => {
                let body = e.body();
                out.push(events::run_error(body.status.as_str(), &body.message));
                return out;
            }
        };
        if let Some(err) = claim_conflict(&output).or(output.error.as_ref().filter(|_| output.is_failed())) {
            let code = match output.failure {
                Some(holdpoint::agent::FailureReason::AlreadyResumed) => "ALREADY_RESUMED",
                _ => err.status.as_str(),
            };
            out.push(events::run_error(code, &err.message));
            return out;
        }
        if output.finish_reason == FinishReason::Interrupted {
            match self.interrupts(&output, &mut out).await {
                Ok(interrupts) if !interrupts.is_empty() => out.push(json!({
                    "type": "RUN_FINISHED",
                    "threadId": self.thread,
                    "runId": self.run,
                    "outcome": {"type": "interrupt", "interrupts": interrupts},
                })),
                Ok(_) => out.push(events::run_error(
                    "INTERNAL",
                    "the run paused, but its holds could not be read",
                )),
                Err(e) => out.push(events::run_error(e.body().status.as_str(), &e.body().message)),
            }
            return out;
        }
        if let Some(message) = &output.message {
            let m = match &output.snapshot_id {
                Some(id) => match self.agent.snapshot(id, &self.caller.caller()).await {
                    Ok(snapshot) => models_in(snapshot.as_ref()).saturating_sub(1),
                    Err(_) => self.translator.last(),
                },
                None => self.translator.last(),
            };
            self.translator.final_text(m, message, &mut out);
        }
        let mut finished = Map::new();
        finished.insert("type".into(), json!("RUN_FINISHED"));
        finished.insert("threadId".into(), json!(self.thread));
        finished.insert("runId".into(), json!(self.run));
        finished.insert("outcome".into(), json!({"type": "success"}));
        let text = output.text();
        if !text.is_empty() {
            finished.insert("result".into(), json!(text));
        }
        out.push(Value::Object(finished));
        out
    }

    /// The AG-UI interrupts of a paused run, one per open hold of its
    /// snapshot, after announcing its paused calls on `out`.
    async fn interrupts(&mut self, output: &AgentOutput, out: &mut Vec<Value>) -> holdpoint::Result<Vec<Value>> {
        let Some(id) = &output.snapshot_id else {
            return Ok(Vec::new());
        };
        let Some(snapshot) = self.agent.snapshot(id, &self.caller.caller()).await? else {
            return Ok(Vec::new());
        };
        let m = models_in(Some(&snapshot)).saturating_sub(1);
        if let Some(message) = &output.message {
            self.translator.final_text(m, message, out);
            self.translator.paused(m, message, out);
        }
        Ok(open_calls(&snapshot)
            .iter()
            .map(|call| events::interrupt(&snapshot, m, call, input_schema(&self.agent, call).as_ref()))
            .collect())
    }
}
