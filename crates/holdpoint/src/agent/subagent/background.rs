//! Background sub-agents (docs/reference.md §16.7): the parent starts a
//! child detached and later checks, waits for (bounded) or aborts it
//! through four tools. A background child's task id is its session id;
//! its state is all in the store, so a parent rebuilt after a restart
//! checks and collects it the same way. A settled task's result is also
//! told to the parent's next turn unasked (`notice.rs`), read as `check`
//! reads it.
//!
//! Invariant: a task id is honoured only for a child session the calling
//! session started (the id carries a digest of the caller's session id)
//! and visible to the caller's principal; any other id reads as unknown.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::{CALLER, SUBAGENT, SUBAGENT_OF, SurfacedHold};
use crate::agent::{Access, Agent, AgentInit, AgentInput, RunOptions, principal_of};
use crate::error::{Error, Result};
use crate::message::{Message, Role};
use crate::model::{FinishReason, ToolDefinition};
use crate::session::{Snapshot, SnapshotStatus};
use crate::tool::{Tool, ToolCall, ToolOutcome};

/// The longest a `wait` tool call blocks, whatever the model asks.
pub const BACKGROUND_MAX_WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Start,
    Check,
    Wait,
    Abort,
}

impl Op {
    fn suffix(self) -> &'static str {
        match self {
            Op::Start => START,
            Op::Check => REPORTING[0],
            Op::Wait => REPORTING[1],
            Op::Abort => REPORTING[2],
        }
    }
}

/// One of the four tools of a background child.
pub(crate) struct BackgroundTool {
    parent: String,
    agent: Agent,
    op: Op,
    definition: ToolDefinition,
    max_wait: Duration,
}

/// The four tools through which `parent` runs `agent` in the background:
/// `NAME_start`, `NAME_check`, `NAME_wait` and `NAME_abort`.
pub(crate) fn tools(parent: &str, agent: &Agent, max_wait: Duration) -> Vec<Arc<dyn Tool>> {
    [Op::Start, Op::Check, Op::Wait, Op::Abort]
        .into_iter()
        .map(|op| {
            Arc::new(BackgroundTool::new(
                parent,
                agent.clone(),
                op,
                max_wait.min(BACKGROUND_MAX_WAIT),
            )) as Arc<dyn Tool>
        })
        .collect()
}

impl BackgroundTool {
    fn new(parent: &str, agent: Agent, op: Op, max_wait: Duration) -> Self {
        let name = format!("{}_{}", agent.name(), op.suffix());
        let task = json!({"type": "string", "description": "The task id the start call returned."});
        let (description, schema) = match op {
            Op::Start => (
                format!(
                    "Starts the agent \"{}\" in the background; returns a task id.",
                    agent.name()
                ),
                json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}),
            ),
            Op::Check => (
                format!(
                    "Says how a background task of \"{}\" stands (and its answer once done).",
                    agent.name()
                ),
                json!({"type": "object", "properties": {"taskId": task}, "required": ["taskId"]}),
            ),
            Op::Wait => (
                format!(
                    "Waits (at most timeoutMs, capped at {} ms) for a background task of \"{}\".",
                    max_wait.as_millis(),
                    agent.name()
                ),
                json!({"type": "object", "properties": {"taskId": task, "timeoutMs": {"type": "integer", "minimum": 0}}, "required": ["taskId"]}),
            ),
            Op::Abort => (
                format!("Aborts a background task of \"{}\".", agent.name()),
                json!({"type": "object", "properties": {"taskId": task}, "required": ["taskId"]}),
            ),
        };
        let mut metadata = Map::new();
        metadata.insert(
            SUBAGENT.to_owned(),
            json!({"agent": agent.name(), "background": op.suffix()}),
        );
        BackgroundTool {
            parent: parent.to_owned(),
            definition: ToolDefinition {
                name,
                description,
                input_schema: Some(schema),
                output_schema: None,
                metadata: Some(metadata),
            },
            agent,
            op,
            max_wait,
        }
    }

    fn caller_session(call: &ToolCall) -> Option<String> {
        call.context
            .request_context()
            .get(CALLER)
            .and_then(|c| c.get("sessionId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// The prefix of the task ids of children the calling session starts.
    fn task_prefix(call: &ToolCall) -> Option<String> {
        Self::caller_session(call).map(|caller| task_prefix(&caller))
    }

    /// The latest snapshot of task `task`, when it is a child of the
    /// calling session that the caller may see (see [`task_snapshot`]).
    async fn task(&self, call: &ToolCall, task: &str) -> Result<Option<Snapshot>> {
        let Some(caller) = Self::caller_session(call) else {
            return Ok(None);
        };
        let principal = principal_of(call.context.request_context());
        task_snapshot(&self.agent, &caller, principal, task).await
    }

    async fn start(&self, call: &ToolCall) -> Result<ToolOutcome> {
        let Some(text) = call.input.get("input").and_then(Value::as_str) else {
            return Ok(ToolOutcome::Failed(format!(
                "tool \"{}\": the input needs a string \"input\"",
                self.definition.name
            )));
        };
        let link = json!({
            "agent": self.parent,
            "sessionId": Self::caller_session(call),
            "tool": call.context.name(),
            "ref": call.context.reference(),
            "background": true,
        });
        let mut message = Message::user_text(text);
        let mut meta = Map::new();
        meta.insert(SUBAGENT_OF.to_owned(), link);
        message.metadata = Some(meta);
        let mut context = call.context.request_context().clone();
        context.remove(CALLER);
        let input = AgentInput {
            message: Some(message),
            detach: Some(true),
            resume: None,
        };
        let Some(prefix) = Self::task_prefix(call) else {
            return Err(Error::FailedPrecondition(format!(
                "tool \"{}\" runs only in a turn of its parent agent",
                self.definition.name
            )));
        };
        let task = format!("{prefix}{}", uuid::Uuid::new_v4().simple());
        let out = self
            .agent
            .run_with(input, RunOptions::new(AgentInit::session(task)).context(context))
            .await;
        match out {
            Ok(out) => Ok(ToolOutcome::output(json!({
                "taskId": out.session_id,
                "status": report_finish(out.finish_reason),
                "answer": (out.finish_reason == FinishReason::Stop).then(|| out.text()),
            }))),
            Err(Error::TurnFailed(out)) => Ok(ToolOutcome::Failed(format!(
                "agent \"{}\" failed: {}",
                self.agent.name(),
                out.error.as_ref().map_or("the turn failed", |e| e.message.as_str())
            ))),
            Err(e) => Err(e),
        }
    }

    async fn wait(&self, call: &ToolCall, task: &str) -> Result<ToolOutcome> {
        let Some(latest) = self.task(call, task).await? else {
            return Ok(unknown(task));
        };
        let asked = call
            .input
            .get("timeoutMs")
            .and_then(Value::as_u64)
            .map_or(self.max_wait, Duration::from_millis);
        let bound = asked.min(self.max_wait);
        if latest.read_status(chrono::Utc::now()) == SnapshotStatus::Pending
            && let Some(store) = self.agent.store()
        {
            let mut statuses = store.watch_status(&latest.snapshot_id).await?;
            let settled = async {
                while let Some(status) = statuses.next().await {
                    if status.is_terminal() {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(bound, settled).await;
        }
        self.check(call, task).await
    }

    async fn check(&self, call: &ToolCall, task: &str) -> Result<ToolOutcome> {
        let Some(caller) = Self::caller_session(call) else {
            return Ok(unknown(task));
        };
        let principal = principal_of(call.context.request_context());
        Ok(match check_report(&self.agent, &caller, principal, task).await? {
            Some(report) => ToolOutcome::output(report),
            None => unknown(task),
        })
    }

    async fn abort(&self, call: &ToolCall, task: &str) -> Result<ToolOutcome> {
        let Some(latest) = self.task(call, task).await? else {
            return Ok(unknown(task));
        };
        if latest.is_waiting() {
            // A paused background child: its holds are closed (abandoned).
            let hold = SurfacedHold {
                agent: self.agent.name().to_owned(),
                session_id: latest.session_id.clone(),
                snapshot_id: latest.snapshot_id.clone(),
                interrupts: Vec::new(),
            };
            if let Some(store) = self.agent.store() {
                let context = call.context.request_context();
                super::abandon::abandon_holds(store.as_ref(), vec![hold], context, super::abandon::LEASE).await;
            }
        } else {
            self.agent.abort(&latest.snapshot_id, Access::Full).await?;
        }
        let after = self.task(call, task).await?.unwrap_or(latest);
        let mut out = report(task, &after);
        out["aborted"] = Value::Bool(true);
        Ok(ToolOutcome::output(out))
    }
}

/// The prefix of the task ids of children session `caller` starts: `bg-`
/// and a digest of the caller's session id.
fn task_prefix(caller: &str) -> String {
    let digest = crate::session::hash_json(&Value::String(caller.to_owned()));
    format!("bg-{}-", &digest[..32])
}

/// The latest snapshot of task `task` of `agent`, when it is a child of
/// session `caller` (its id has the caller's prefix) that `principal` may
/// see: the one read behind every tool of a task, and behind its notice.
async fn task_snapshot(agent: &Agent, caller: &str, principal: Option<&str>, task: &str) -> Result<Option<Snapshot>> {
    if !task.starts_with(&task_prefix(caller)) {
        return Ok(None);
    }
    agent.latest_snapshot(task, Access::As(principal)).await
}

/// What `check` would answer about task `task` of `agent` in a turn of
/// session `caller` for `principal`: `None` for a task that is not that
/// session's or not visible (one store read, none for a foreign id).
pub(super) async fn check_report(
    agent: &Agent,
    caller: &str,
    principal: Option<&str>,
    task: &str,
) -> Result<Option<Value>> {
    Ok(task_snapshot(agent, caller, principal, task)
        .await?
        .map(|latest| report(task, &latest)))
}

/// Whether a report's `status` is final: the task will not change on its
/// own (`running` and `paused` tasks still may).
pub(super) fn is_settled(status: &str) -> bool {
    matches!(status, "done" | "failed" | "aborted" | "expired" | "closed")
}

/// The suffix of the `start` tool's name (`NAME_start`).
pub(super) const START: &str = "start";

/// The suffixes of the tools whose outputs report a task's status.
pub(super) const REPORTING: [&str; 3] = ["check", "wait", "abort"];

fn unknown(task: &str) -> ToolOutcome {
    ToolOutcome::Failed(format!("no background task {task} of this conversation"))
}

fn report_finish(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Detached => "running",
        FinishReason::Interrupted => "paused",
        FinishReason::Failed => "failed",
        _ => "done",
    }
}

/// What a check says about a task whose latest snapshot is `latest`.
fn report(task: &str, latest: &Snapshot) -> Value {
    let status =
        match latest.read_status(chrono::Utc::now()) {
            SnapshotStatus::Pending | SnapshotStatus::Aborting => "running",
            SnapshotStatus::Failed => "failed",
            SnapshotStatus::Aborted => "aborted",
            SnapshotStatus::Expired => "expired",
            SnapshotStatus::Completed if latest.finish_reason == Some(FinishReason::Interrupted) => {
                if latest.is_waiting() { "paused" } else { "closed" }
            }
            SnapshotStatus::Completed => "done",
        };
    let mut out = json!({"taskId": task, "status": status});
    if status == "done" {
        let answer = latest
            .state
            .as_ref()
            .and_then(|s| s.messages.iter().rev().find(|m| m.role == Role::Model))
            .map(Message::text)
            .unwrap_or_default();
        out["answer"] = Value::String(answer);
    }
    if let Some(error) = &latest.error {
        out["error"] = Value::String(error.message.clone());
    }
    out
}

#[async_trait]
impl Tool for BackgroundTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        if !self.agent.is_server_managed() {
            return Err(Error::FailedPrecondition(format!(
                "background sub-agent \"{}\" keeps no sessions: it needs a session store",
                self.agent.name()
            )));
        }
        if self.op == Op::Start {
            return self.start(&call).await;
        }
        let Some(task) = call.input.get("taskId").and_then(Value::as_str).map(str::to_owned) else {
            return Ok(ToolOutcome::Failed(format!(
                "tool \"{}\": the input needs a string \"taskId\"",
                self.definition.name
            )));
        };
        match self.op {
            Op::Check => self.check(&call, &task).await,
            Op::Wait => self.wait(&call, &task).await,
            Op::Abort => self.abort(&call, &task).await,
            Op::Start => self.start(&call).await,
        }
    }

    fn check_output(&self, _output: &Value) -> Result<()> {
        Ok(())
    }
}
