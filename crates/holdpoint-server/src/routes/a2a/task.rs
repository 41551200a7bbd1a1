//! A2A tasks read from the store: which snapshots a task id names, the
//! state they put it in, and the `Task` object a client sees.
//!
//! A task is one turn of a session: it starts with a user message and
//! runs, through any number of holds and their resumes, until the turn
//! ends. Its id is `{sessionId}@{base}`, where `base` is the session's
//! latest snapshot when the task started (`0` for a new session), so the
//! id is durable and needs no table of its own: the task's snapshots are
//! the descendants of `base` that hold exactly one user message more.

use chrono::SecondsFormat;
use holdpoint::FinishReason;
use holdpoint::agent::{Agent, PendingApproval};
use holdpoint::message::{Message, Role};
use holdpoint::session::{Snapshot, SnapshotStatus};
use serde_json::{Map, Value, json};

use super::error::RpcError;
use crate::auth::Identity;
use crate::routes::agui::resume::{interrupt_id, response_schema};

/// Separates the session from the base snapshot in a task id.
const SEPARATOR: char = '@';

/// The base of a task that started a new session.
const NEW_SESSION: &str = "0";

/// How many snapshots a read walks back at most.
const MAX_CHAIN: usize = 10_000;

/// The denial reason `CancelTask` gives each open hold; a task whose
/// answered calls carry it reads as canceled.
pub(super) const CANCEL_REASON: &str = "the A2A task was canceled (CancelTask)";

/// A task id: a session and the snapshot its turn started from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TaskId {
    /// The session (the A2A `contextId`).
    pub(super) session: String,
    /// The session's latest snapshot when the task started; `None` when
    /// the task started the session.
    pub(super) base: Option<String>,
}

impl TaskId {
    /// Reads a task id; `None` when it is not one of ours.
    pub(super) fn parse(id: &str) -> Option<Self> {
        let (session, base) = id.rsplit_once(SEPARATOR)?;
        if session.is_empty() || base.is_empty() {
            return None;
        }
        Some(TaskId {
            session: session.to_owned(),
            base: (base != NEW_SESSION).then(|| base.to_owned()),
        })
    }

    /// The wire form.
    pub(super) fn wire(&self) -> String {
        format!(
            "{}{SEPARATOR}{}",
            self.session,
            self.base.as_deref().unwrap_or(NEW_SESSION)
        )
    }
}

/// A2A's `TaskState`, as far as a Holdpoint turn reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// The turn (or a resume of it) runs.
    Working,
    /// The turn waits at one or more holds.
    InputRequired,
    /// The turn ended.
    Completed,
    /// The turn failed.
    Failed,
    /// Canceled: its holds denied by `CancelTask`, abandoned by a new
    /// message, or its run aborted.
    Canceled,
}

impl State {
    /// The ProtoJSON name.
    pub(super) fn wire(self) -> &'static str {
        match self {
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Canceled => "TASK_STATE_CANCELED",
        }
    }

    /// Whether nothing follows.
    pub(super) fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }
}

/// A task as the store has it now.
#[derive(Debug, Clone)]
pub(super) struct View {
    /// Its id.
    pub(super) id: TaskId,
    /// Its state.
    pub(super) state: State,
    /// Its latest snapshot (none while its first run has written none).
    pub(super) snapshot: Option<Snapshot>,
    /// The number of messages of the session before the task.
    pub(super) base_len: usize,
    /// Its open holds (when it waits).
    pub(super) holds: Vec<PendingApproval>,
}

/// The user messages of a snapshot's conversation.
fn users(snapshot: &Snapshot) -> usize {
    messages(snapshot).iter().filter(|m| m.role == Role::User).count()
}

fn messages(snapshot: &Snapshot) -> &[Message] {
    snapshot.state.as_ref().map_or(&[], |s| s.messages.as_slice())
}

/// Whether the task's answered calls were denied by `CancelTask`.
fn canceled(snapshot: &Snapshot, base_len: usize) -> bool {
    messages(snapshot)
        .iter()
        .skip(base_len)
        .filter(|m| m.role == Role::Tool)
        .any(|m| serde_json::to_string(m).is_ok_and(|s| s.contains(CANCEL_REASON)))
}

/// The open holds of `snapshot` (none unless it waits).
pub(super) fn open_calls(snapshot: &Snapshot) -> Vec<PendingApproval> {
    if snapshot.is_waiting() {
        PendingApproval::of(snapshot)
    } else {
        Vec::new()
    }
}

async fn read(agent: &Agent, caller: &Identity, id: &str) -> Result<Option<Snapshot>, RpcError> {
    agent.snapshot(id, &caller.caller()).await.map_err(RpcError::from_core)
}

/// The task `id` as `caller` may see it: unknown ids, another principal's
/// sessions and another agent's read as task-not-found.
pub(super) async fn load(agent: &Agent, caller: &Identity, id: &TaskId) -> Result<View, RpcError> {
    let not_found = || RpcError::task_not_found(&id.wire());
    let latest = agent
        .latest_snapshot(&id.session, &caller.caller())
        .await
        .map_err(RpcError::from_core)?
        .ok_or_else(not_found)?;
    let (base_users, base_len) = match &id.base {
        Some(b) => {
            let base = read(agent, caller, b)
                .await?
                .filter(|s| s.session_id == id.session)
                .ok_or_else(not_found)?;
            (users(&base), messages(&base).len())
        }
        None => (0, 0),
    };
    // Walk back from the latest snapshot to the base.
    let mut chain = Vec::new();
    let mut next = Some(latest);
    let mut reached = id.base.is_none();
    for _ in 0..MAX_CHAIN {
        let Some(s) = next.take() else { break };
        if id.base.as_deref() == Some(s.snapshot_id.as_str()) {
            reached = true;
            break;
        }
        if users(&s) <= base_users {
            break;
        }
        let parent = s.parent_id.clone();
        chain.push(s);
        next = match parent {
            Some(p) => read(agent, caller, &p).await?,
            None => None,
        };
    }
    if !reached {
        return Err(not_found());
    }
    let later = chain.iter().any(|s| users(s) > base_users + 1);
    let current = chain.into_iter().find(|s| users(s) == base_users + 1);
    let Some(current) = current else {
        let state = if later { State::Failed } else { State::Working };
        return Ok(View {
            id: id.clone(),
            state,
            snapshot: None,
            base_len,
            holds: Vec::new(),
        });
    };
    let mut holds = Vec::new();
    let state = match current.status {
        SnapshotStatus::Pending | SnapshotStatus::Aborting => State::Working,
        SnapshotStatus::Failed | SnapshotStatus::Expired => State::Failed,
        SnapshotStatus::Aborted => State::Canceled,
        SnapshotStatus::Completed if current.finish_reason == Some(FinishReason::Interrupted) => {
            if current.resumed_at.is_none() {
                holds = open_calls(&current);
                State::InputRequired
            } else if later {
                State::Canceled
            } else {
                State::Working
            }
        }
        SnapshotStatus::Completed if canceled(&current, base_len) => State::Canceled,
        SnapshotStatus::Completed => State::Completed,
    };
    Ok(View {
        id: id.clone(),
        state,
        snapshot: Some(current),
        base_len,
        holds,
    })
}

/// The task a waiting session's latest snapshot belongs to: its base is
/// the nearest ancestor with one user message fewer.
pub(super) async fn task_of(agent: &Agent, caller: &Identity, latest: &Snapshot) -> Result<TaskId, RpcError> {
    let own = users(latest);
    let mut next = latest.parent_id.clone();
    for _ in 0..MAX_CHAIN {
        let Some(id) = next.take() else { break };
        let Some(s) = read(agent, caller, &id).await? else {
            break;
        };
        if users(&s) < own {
            return Ok(TaskId {
                session: latest.session_id.clone(),
                base: Some(s.snapshot_id),
            });
        }
        next = s.parent_id.clone();
    }
    Ok(TaskId {
        session: latest.session_id.clone(),
        base: None,
    })
}

/// The input schema of the agent's own tool a root-level hold is of.
pub(super) fn input_schema(agent: &Agent, call: &PendingApproval) -> Option<Value> {
    if !call.path.is_empty() {
        return None;
    }
    agent
        .tool_definitions()
        .iter()
        .find(|d| d.name == call.tool)
        .and_then(|d| d.input_schema.clone())
}

/// The hold's summary for people: the tool's preview summary, else the
/// interrupt's `message` or `details`, else the line built from the
/// (redacted) input.
fn summary(call: &PendingApproval) -> String {
    ["message", "details", "reason"]
        .iter()
        .find_map(|k| call.interrupt.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .filter(|_| call.preview.is_none())
        .unwrap_or_else(|| call.summary())
}

/// The data of one open hold: what it is, and the JSON Schemas of its
/// answer (`answerSchema`, the whole data part) and of `respond`
/// (`responseSchema`).
pub(super) fn hold_data(agent: &Agent, snapshot: &Snapshot, call: &PendingApproval) -> Value {
    let id = interrupt_id(&snapshot.snapshot_id, call);
    let input = input_schema(agent, call);
    let respond = response_schema(call, input.as_ref());
    let approval = call.interrupted_by.is_some() || call.reply.is_some();
    let mut data = json!({
        "kind": "holdpoint.hold",
        "holdId": id,
        "snapshotId": snapshot.snapshot_id,
        "tool": call.tool,
        "input": call.input,
        "interrupt": call.interrupt,
        "reason": if approval { "tool_approval" } else { "input_required" },
        "message": summary(call),
        "responseSchema": respond,
        "answerSchema": {
            "type": "object",
            "properties": {
                "holdId": {"const": id},
                "approve": {"type": "boolean"},
                "input": input.unwrap_or_else(|| json!({"type": "object"})),
                "deny": {"type": ["string", "boolean"]},
                "respond": respond,
            },
            "additionalProperties": false,
            "oneOf": [
                {"required": ["approve"]},
                {"required": ["deny"]},
                {"required": ["respond"]},
            ],
        },
    });
    if let Some(p) = &call.preview {
        data["preview"] = json!(p);
    }
    if let Some(why) = &call.unapprovable {
        data["unapprovable"] = json!(why);
    }
    if let Some(r) = &call.reference {
        data["ref"] = json!(r);
    }
    if let Some(by) = &call.interrupted_by {
        data["interruptedBy"] = json!(by);
    }
    if let Some(at) = call.expires_at {
        data["expiresAt"] = json!(at.to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    if let Some(rule) = &call.rule {
        data["rule"] = json!(rule);
        data["approvals"] = json!(call.approvals);
    }
    if !call.path.is_empty() {
        data["path"] = json!(call.path);
    }
    if let Some(step) = call.path.last() {
        data["subagentSessionId"] = json!(step.session_id);
    }
    data
}

/// An agent message of the task.
fn agent_message(view: &View, id: String, parts: Vec<Value>) -> Value {
    json!({
        "messageId": id,
        "contextId": view.id.session,
        "taskId": view.id.wire(),
        "role": "ROLE_AGENT",
        "parts": parts,
    })
}

/// The text of the last model message of the task.
fn last_text(view: &View) -> String {
    view.snapshot
        .as_ref()
        .map(messages)
        .unwrap_or_default()
        .iter()
        .skip(view.base_len)
        .rev()
        .find(|m| m.role == Role::Model)
        .map(Message::text)
        .unwrap_or_default()
}

/// The task's `TaskStatus`.
pub(super) fn status(agent: &Agent, view: &View) -> Value {
    let mut status = Map::new();
    status.insert("state".into(), json!(view.state.wire()));
    let at = view.snapshot.as_ref().map_or_else(chrono::Utc::now, |s| s.updated_at);
    status.insert(
        "timestamp".into(),
        json!(at.to_rfc3339_opts(SecondsFormat::Millis, true)),
    );
    let snapshot_id = view
        .snapshot
        .as_ref()
        .map(|s| s.snapshot_id.clone())
        .unwrap_or_default();
    let text = last_text(view);
    let text_part = |t: String| json!({"text": t, "mediaType": "text/plain"});
    let message = match (view.state, &view.snapshot) {
        (State::InputRequired, Some(snapshot)) => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(text_part(text));
            }
            parts.extend(
                view.holds
                    .iter()
                    .map(|call| json!({"data": hold_data(agent, snapshot, call), "mediaType": "application/json"})),
            );
            Some(agent_message(view, format!("{snapshot_id}-holds"), parts))
        }
        (State::Completed, Some(_)) => Some(agent_message(
            view,
            format!("{snapshot_id}-reply"),
            vec![text_part(text)],
        )),
        (State::Failed, snapshot) => {
            let why = snapshot
                .as_ref()
                .and_then(|s| s.error.as_ref())
                .map_or_else(|| "the turn failed".to_owned(), |e| e.message.clone());
            Some(agent_message(
                view,
                format!("{snapshot_id}-failed"),
                vec![text_part(why)],
            ))
        }
        (State::Canceled, Some(_)) if !text.is_empty() => Some(agent_message(
            view,
            format!("{snapshot_id}-canceled"),
            vec![text_part(text)],
        )),
        _ => None,
    };
    if let Some(m) = message {
        status.insert("message".into(), m);
    }
    Value::Object(status)
}

/// The task's result artifact, once it completed.
pub(super) fn artifacts(view: &View) -> Vec<Value> {
    if view.state != State::Completed {
        return Vec::new();
    }
    vec![json!({
        "artifactId": "result",
        "name": "result",
        "parts": [{"text": last_text(view), "mediaType": "text/plain"}],
    })]
}

/// The A2A `Task` object.
pub(super) fn task(agent: &Agent, view: &View) -> Value {
    let mut task = json!({
        "id": view.id.wire(),
        "contextId": view.id.session,
        "status": status(agent, view),
    });
    let artifacts = artifacts(view);
    if !artifacts.is_empty() {
        task["artifacts"] = Value::Array(artifacts);
    }
    if let Some(s) = &view.snapshot {
        task["metadata"] = json!({"holdpoint": {"snapshotId": s.snapshot_id, "agent": agent.name()}});
    }
    task
}
