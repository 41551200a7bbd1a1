//! The agent over A2A (Agent2Agent) 1.0 (docs/reference.md, "A2A"):
//! `GET /agents/{name}/.well-known/agent-card.json`, the agent card, and
//! `POST /agents/{name}/a2a`, the JSON-RPC binding (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`).
//!
//! A context is a Holdpoint session and a task one turn of it (see
//! [`task`] for the ids). A turn that pauses leaves its task
//! `TASK_STATE_INPUT_REQUIRED`, its status message carrying a data part
//! per open hold; the caller answers with `SendMessage` on the same
//! `taskId`, data parts in, and the answer becomes a resume of the paused
//! snapshot through the ordinary agent run, so the one decision path —
//! rules, roles, quorum, grants, exactly-once — decides it. Task state is
//! read from the store, so an answer given elsewhere (the inbox, the CLI)
//! moves the task on for `GetTask` and `SubscribeToTask` too. What the
//! protocol refuses is a JSON-RPC error with A2A's codes and changes
//! nothing. Authentication, agent scopes and session visibility are the
//! API's: 401 and 403 before any JSON-RPC, another principal's task
//! reads as not found.

mod answer;
mod card;
mod error;
mod stream;
mod task;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, FailureReason, PendingApproval};
use holdpoint::session::Snapshot;
use serde_json::{Value, json};

use self::error::RpcError;
use self::task::{State as TaskState, TaskId, View};
use crate::auth::{Caller, Identity};
use crate::envelope::ApiPath;
use crate::error::ApiError;
use crate::metrics::TurnMeta;
use crate::routes::agents::{self as turns, claim_conflict};
use crate::routes::agui::resume;
use crate::state::AppState;

pub(crate) use self::card::card;

/// The A2A protocol version spoken.
pub(crate) const PROTOCOL_VERSION: &str = "1.0";

/// One request's agent and caller.
#[derive(Clone)]
pub(super) struct Ctx {
    state: AppState,
    agent: Agent,
    caller: Identity,
}

/// What a `SendMessage` does.
enum Turn {
    /// Runs a turn: new input, or a resume of the paused snapshot.
    Run {
        input: Box<AgentInput>,
        init: AgentInit,
        /// The paused snapshot a resume answers.
        held: Option<String>,
    },
    /// Records one approval toward the quorum of the one open hold.
    Approve {
        snapshot: Box<Snapshot>,
        call: Box<PendingApproval>,
    },
}

/// A checked `SendMessage`: its task and what it does.
struct Prepared {
    id: TaskId,
    turn: Turn,
}

/// A fresh context id.
fn new_context_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        bytes[..8].copy_from_slice(&now.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A string field of `params`, required.
fn required<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RpcError::invalid_params("INVALID_PARAMS", format!("params.{key} is required")))
}

/// The task `id` names, or task-not-found.
fn task_id(id: &str) -> Result<TaskId, RpcError> {
    TaskId::parse(id).ok_or_else(|| RpcError::task_not_found(id))
}

/// The approval toward a quorum a resume is: the one open hold, under a
/// rule needing several approvers, answered with a bare approval.
fn single_approval<'a>(open: &'a [PendingApproval], entries: &[resume::ResumeEntry]) -> Option<&'a PendingApproval> {
    let ([call], [entry]) = (open, entries) else {
        return None;
    };
    let plain = entry.status == resume::EntryStatus::Resolved && entry.payload.is_none();
    (plain && call.rule.as_ref().is_some_and(|r| r.quorum > 1)).then_some(call)
}

/// A refusal of an output: a resume that lost its claim or was refused by
/// a rule, and a run that failed with nothing written.
fn check_output(out: &AgentOutput, held: Option<&str>) -> Result<(), RpcError> {
    if let Some(err) = claim_conflict(out) {
        let reason = match out.failure {
            Some(FailureReason::AlreadyResumed) => "ALREADY_RESUMED",
            _ => err.status.as_str(),
        };
        return Err(RpcError::invalid_params(reason, err.message.clone()));
    }
    if out.is_failed() && (out.snapshot_id.is_none() || out.snapshot_id.as_deref() == held) {
        let (status, message) = out.error.as_ref().map_or_else(
            || (holdpoint::Status::Internal, "the turn failed".to_owned()),
            |e| (e.status, e.message.clone()),
        );
        return Err(RpcError::from_status(status, message));
    }
    Ok(())
}

impl Ctx {
    /// Why an answer naming no open hold is refused: a hold of an answered
    /// snapshot is a replay, anything else unknown.
    async fn stale(&self, hold_id: &str) -> RpcError {
        if let Some(id) = resume::snapshot_of(hold_id)
            && let Ok(Some(snapshot)) = self.agent.snapshot(id, &self.caller.caller()).await
            && snapshot.resumed_at.is_some()
        {
            return RpcError::invalid_params(
                "ALREADY_RESUMED",
                format!("hold {hold_id} was answered already; an answer runs once"),
            );
        }
        RpcError::invalid_params("UNKNOWN_HOLD", format!("no open hold of this task is named {hold_id}"))
    }

    /// The hold ids the data parts of a message name.
    fn named_holds(parts: &[Value]) -> Vec<String> {
        parts
            .iter()
            .filter_map(|p| p.get("data")?.get("holdId")?.as_str().map(str::to_owned))
            .collect()
    }

    /// Checks a `SendMessage` and decides what it does; refusals change
    /// nothing.
    async fn prepare(&self, params: &Value) -> Result<Prepared, RpcError> {
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::invalid_params("INVALID_PARAMS", "params.message is required"))?;
        let parts: Vec<Value> = message
            .get("parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if parts.is_empty() {
            return Err(RpcError::invalid_params("INVALID_PARAMS", "the message has no parts"));
        }
        if let Some(role) = message.get("role").and_then(Value::as_str)
            && role != "ROLE_USER"
        {
            return Err(RpcError::invalid_params(
                "INVALID_PARAMS",
                format!("a message to the agent has role ROLE_USER, not {role}"),
            ));
        }
        let context = message
            .get("contextId")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty());
        match message.get("taskId").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            Some(given) => self.answer(given, context, &parts).await,
            None => self.new_task(context, &parts).await,
        }
    }

    /// A message on an existing task: the answers to its holds.
    async fn answer(&self, given: &str, context: Option<&str>, parts: &[Value]) -> Result<Prepared, RpcError> {
        let id = task_id(given)?;
        if context.is_some_and(|c| c != id.session) {
            return Err(RpcError::invalid_params(
                "CONTEXT_MISMATCH",
                format!("task {given} belongs to context {}", id.session),
            ));
        }
        let view = task::load(&self.agent, &self.caller, &id).await?;
        let snapshot = match (&view.state, &view.snapshot) {
            (TaskState::InputRequired, Some(s)) => s.clone(),
            (state, _) => {
                if let Some(hold) = Self::named_holds(parts).first() {
                    return Err(self.stale(hold).await);
                }
                return Err(RpcError::unsupported(if state.is_terminal() {
                    format!("task {given} is in terminal state {}", state.wire())
                } else {
                    format!(
                        "task {given} is {}; it takes no input until it waits again",
                        state.wire()
                    )
                }));
            }
        };
        let entries = answer::entries(&snapshot.snapshot_id, &view.holds, parts)?;
        if let Some(old) = entries
            .iter()
            .find(|e| resume::snapshot_of(&e.interrupt_id) != Some(snapshot.snapshot_id.as_str()))
        {
            return Err(self.stale(&old.interrupt_id).await);
        }
        let directives = answer::plan(&self.agent, &snapshot.snapshot_id, &view.holds, &entries)?;
        if let Some(call) = single_approval(&view.holds, &entries) {
            return Ok(Prepared {
                id,
                turn: Turn::Approve {
                    call: Box::new(call.clone()),
                    snapshot: Box::new(snapshot),
                },
            });
        }
        Ok(Prepared {
            id,
            turn: Turn::Run {
                input: Box::new(AgentInput::resume(directives)),
                init: AgentInit::snapshot(snapshot.snapshot_id.clone()),
                held: Some(snapshot.snapshot_id),
            },
        })
    }

    /// A message without a task: a new turn of its context.
    async fn new_task(&self, context: Option<&str>, parts: &[Value]) -> Result<Prepared, RpcError> {
        let session = context.map_or_else(new_context_id, str::to_owned);
        let latest = self
            .agent
            .latest_snapshot(&session, &self.caller.caller())
            .await
            .map_err(RpcError::from_core)?;
        if let Some(l) = &latest {
            let open = task::open_calls(l);
            if !open.is_empty() {
                let waiting = task::task_of(&self.agent, &self.caller, l).await?;
                return Err(RpcError::invalid_params(
                    "HOLDS_PENDING",
                    format!(
                        "task {} of context {session} waits at {} hold(s): answer it (SendMessage with its taskId) before new input",
                        waiting.wire(),
                        open.len()
                    ),
                ));
            }
        }
        if let Some(hold) = Self::named_holds(parts).first() {
            return Err(self.stale(hold).await);
        }
        let text: String = parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        if text.is_empty() {
            return Err(RpcError::invalid_params("NO_INPUT", "a new task needs a text part"));
        }
        Ok(Prepared {
            id: TaskId {
                session: session.clone(),
                base: latest.map(|l| l.snapshot_id),
            },
            turn: Turn::Run {
                input: Box::new(AgentInput::text(text)),
                init: AgentInit::session(session),
                held: None,
            },
        })
    }

    fn meta(&self) -> TurnMeta {
        TurnMeta {
            agent: self.agent.name().to_owned(),
        }
    }

    /// Records a quorum approval; the output when it decided the hold.
    async fn approve(&self, snapshot: &Snapshot, call: &PendingApproval) -> Result<(), RpcError> {
        let answer = Answer {
            reference: call.reference.clone(),
            tool: Some(call.tool.clone()),
            ..Answer::approve(snapshot.snapshot_id.clone())
        };
        match self
            .agent
            .decisions()
            .answer(answer, self.caller.request_context())
            .await
            .map_err(RpcError::from_core)?
        {
            Answered::Recorded { .. } => Ok(()),
            Answered::Resumed(out) | Answered::Granted { output: out, .. } => {
                check_output(&out, Some(&snapshot.snapshot_id))
            }
        }
    }

    /// Runs a prepared message to its end and reads its task.
    async fn execute(&self, prepared: Prepared) -> Result<View, RpcError> {
        match prepared.turn {
            Turn::Run { input, init, held } => {
                let out = turns::run_once(
                    &self.state,
                    self.agent.clone(),
                    *input,
                    init,
                    self.caller.request_context(),
                    self.meta(),
                )
                .await
                .or_else(holdpoint::Error::into_failed_output)
                .map_err(|e| RpcError::from_status(e.status(), e.to_string()))?;
                check_output(&out, held.as_deref())?;
            }
            Turn::Approve { snapshot, call } => self.approve(&snapshot, &call).await?,
        }
        task::load(&self.agent, &self.caller, &prepared.id).await
    }

    /// `SendMessage`: `{"task": Task}`.
    async fn send(&self, params: &Value) -> Result<Value, RpcError> {
        let prepared = self.prepare(params).await?;
        let view = self.execute(prepared).await?;
        Ok(json!({"task": task::task(&self.agent, &view)}))
    }

    /// `GetTask`: the `Task`.
    async fn get(&self, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(required(params, "id")?)?;
        let view = task::load(&self.agent, &self.caller, &id).await?;
        Ok(task::task(&self.agent, &view))
    }

    /// `CancelTask`: denies every open hold of a waiting task (the model
    /// hears the denial and ends the turn); the task as it is then.
    async fn cancel(&self, params: &Value) -> Result<Value, RpcError> {
        let given = required(params, "id")?;
        let id = task_id(given)?;
        let view = task::load(&self.agent, &self.caller, &id).await?;
        let snapshot = match (view.state, &view.snapshot) {
            (TaskState::InputRequired, Some(s)) => s.clone(),
            (state, _) => {
                return Err(RpcError::not_cancelable(format!(
                    "task {given} is {}; only a task waiting at its holds can be canceled",
                    state.wire()
                )));
            }
        };
        let entries: Vec<resume::ResumeEntry> = view
            .holds
            .iter()
            .map(|c| {
                answer::deny(
                    resume::interrupt_id(&snapshot.snapshot_id, c),
                    Some(task::CANCEL_REASON.into()),
                )
            })
            .collect();
        let directives = answer::plan(&self.agent, &snapshot.snapshot_id, &view.holds, &entries)
            .map_err(|e| RpcError::not_cancelable(e.message))?;
        let prepared = Prepared {
            id,
            turn: Turn::Run {
                input: Box::new(AgentInput::resume(directives)),
                init: AgentInit::snapshot(snapshot.snapshot_id.clone()),
                held: Some(snapshot.snapshot_id),
            },
        };
        let view = self.execute(prepared).await.map_err(|e| match e.reason.as_str() {
            "PERMISSION_DENIED" | "ALREADY_RESUMED" => RpcError::not_cancelable(e.message),
            _ => e,
        })?;
        Ok(task::task(&self.agent, &view))
    }
}

/// A JSON-RPC response over HTTP 200.
fn rpc_json(body: Value) -> Response {
    axum::Json(body).into_response()
}

/// The JSON-RPC endpoint: `POST /agents/{name}/a2a`.
pub(crate) async fn rpc(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    if agent.store().is_none() {
        return Err(ApiError::new(
            holdpoint::Status::FailedPrecondition,
            format!("agent \"{name}\" keeps no sessions (client-held state); A2A tasks need a server-managed agent"),
        ));
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return Ok(rpc_json(RpcError::parse(e.to_string()).response(&Value::Null))),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = match (request.get("jsonrpc").and_then(Value::as_str), request.get("method")) {
        (Some("2.0"), Some(Value::String(m))) => m.clone(),
        _ => {
            let e = RpcError::invalid_request("a JSON-RPC 2.0 request has jsonrpc \"2.0\" and a method");
            return Ok(rpc_json(e.response(&id)));
        }
    };
    if let Some(asked) = headers.get("a2a-version").and_then(|v| v.to_str().ok())
        && !asked.is_empty()
        && asked.split('.').next() != Some("1")
    {
        return Ok(rpc_json(RpcError::version(asked).response(&id)));
    }
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    let ctx = Ctx { state, agent, caller };
    let result = match method.as_str() {
        "SendMessage" => ctx.send(&params).await,
        "SendStreamingMessage" => return Ok(stream::send(ctx, id, params).await),
        "SubscribeToTask" => return Ok(stream::subscribe(ctx, id, params).await),
        "GetTask" => ctx.get(&params).await,
        "CancelTask" => ctx.cancel(&params).await,
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(RpcError::push_not_supported()),
        "ListTasks" => Err(RpcError::unsupported("ListTasks is not offered; read a task by its id")),
        "GetExtendedAgentCard" => Err(RpcError::unsupported("there is no extended agent card")),
        other => Err(RpcError::method_not_found(other)),
    };
    Ok(rpc_json(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => e.response(&id),
    }))
}
