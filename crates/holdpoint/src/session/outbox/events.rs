//! The rows a store writes in the transaction of the change they report:
//! a hold's `hold.created` and timers, a claim's `hold.decided` and
//! in-doubt timer, a partial approval.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::event::OutboxEvent;
use super::timers::{OnExpire, parse_time, rfc3339};
use super::{
    APPROVERS, ESCALATE_AT, ESCALATE_TO, HOLD_CREATED, HOLD_DECIDED, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT,
    HOLD_PARTIALLY_APPROVED, HOLD_REMINDED, ON_EXPIRE, REMIND_AT,
};
use crate::message::{Part, ToolRequest, metadata};
use crate::session::audit::AuditRecord;
use crate::session::snapshot::Snapshot;

/// The events a store writes with a save of `row`, when `row` waits for an
/// answer and `was_waiting` (the row it replaces waited too) is false: a
/// `hold.created` per paused call, and the timer rows its interrupt data
/// asks for ([`REMIND_AT`], [`ESCALATE_AT`], `expiresAt`). Nothing for any
/// other save, and nothing for a claim marker.
///
/// A hold is told where it is answered (docs/reference.md §16.3): a paused
/// call that surfaces a sub-agent's holds is told as those nested calls
/// (their tool, input and interrupt data, under the compound ref, on this
/// row), and the row of a foreground sub-agent's session tells nothing.
pub fn hold_events(was_waiting: bool, row: &Snapshot) -> Vec<OutboxEvent> {
    if was_waiting || !row.is_waiting() || row.is_state_claim() {
        return Vec::new();
    }
    let Some(state) = row.state.as_ref() else {
        return Vec::new();
    };
    if runs_as_subagent(state) {
        return Vec::new();
    }
    let Some(last) = state.messages.last() else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut calls = Vec::new();
    for part in last.interrupts() {
        nested_calls(Cow::Borrowed(part), 0, &mut calls);
    }
    let mut out = Vec::new();
    for part in &calls {
        call_events(row, part, now, &mut out);
    }
    out
}

/// The `hold.created` event of the paused call `part` of `row`, then the
/// timer rows its interrupt data asks for.
fn call_events(row: &Snapshot, part: &Part, now: DateTime<Utc>, out: &mut Vec<OutboxEvent>) {
    let Some(req) = part.as_tool_request() else { return };
    let interrupt = part.interrupt_data().unwrap_or_default();
    // What the timers need is read before the interrupt moves into the
    // event's data.
    let timers = Timers::of(part, &interrupt);
    let data = hold_data(row, part, req, interrupt, timers.expires_at);
    let event = |kind: &str, data: Value, due: DateTime<Utc>| {
        OutboxEvent::new(kind, &row.snapshot_id, &row.session_id, row.agent.as_deref(), data, due)
    };
    // The timers copy the data; `hold.created` takes it.
    let mut timer_events = timers.events(&data, &event);
    out.push(event(HOLD_CREATED, data, now));
    out.append(&mut timer_events);
}

/// The data of a hold's events: where it is, the call (its input masked
/// as receivers see it, docs/reference.md §22.1), who answers it, when it
/// expires, and the tool's preview.
fn hold_data(
    row: &Snapshot,
    part: &Part,
    req: &ToolRequest,
    interrupt: Map<String, Value>,
    expires_at: Option<DateTime<Utc>>,
) -> Value {
    // The rule on the part names the approvers; rows written before the
    // rule moved out of the interrupt data carry them there.
    let approvers = part
        .meta(metadata::APPROVAL_RULE)
        .and_then(|rule| rule.get(APPROVERS))
        .or_else(|| interrupt.get(APPROVERS))
        .cloned()
        .unwrap_or_else(|| json!([]));
    // What receivers read is masked: the input, and the child parts a
    // surfaced hold carries. Copied only when something is to be masked.
    let (input, interrupt) = if part.meta(metadata::REDACT).is_some() || interrupt.contains_key(metadata::SUBAGENT) {
        let mut shown: Part = part.clone();
        crate::review::redact_part(&mut shown);
        let input = shown.as_tool_request().and_then(|r| r.input.clone());
        (
            input.unwrap_or(Value::Null),
            shown.interrupt_data().unwrap_or(interrupt),
        )
    } else {
        (req.input.clone().unwrap_or(Value::Null), interrupt)
    };
    let mut data = json!({
        "agent": row.agent,
        "sessionId": row.session_id,
        "snapshotId": row.snapshot_id,
        "ref": req.reference,
        "tool": req.name,
        "input": input,
        "interrupt": Value::Object(interrupt),
        "approvers": approvers,
        "decisions": [],
    });
    if let Some(obj) = data.as_object_mut() {
        if let Some(at) = expires_at {
            obj.insert("expiresAt".into(), Value::String(rfc3339(at)));
        }
        // The tool's preview (its summary is the headline) and why the
        // hold cannot be approved as is, when they apply.
        for key in [metadata::PREVIEW, metadata::UNAPPROVABLE] {
            if let Some(v) = part.meta(key) {
                obj.insert(key.to_owned(), v.clone());
            }
        }
    }
    data
}

/// The timers a paused call asks for: a reminder, an escalation (and to
/// whom), and its expiry (and what then).
struct Timers {
    remind_at: Option<DateTime<Utc>>,
    escalation: Option<(DateTime<Utc>, Value)>,
    expires_at: Option<DateTime<Utc>>,
    on_expire: OnExpire,
}

impl Timers {
    fn of(part: &Part, interrupt: &Map<String, Value>) -> Timers {
        let at = |key: &str| interrupt.get(key).and_then(Value::as_str).and_then(parse_time);
        Timers {
            remind_at: at(REMIND_AT),
            escalation: at(ESCALATE_AT).map(|due| {
                let to = interrupt.get(ESCALATE_TO).cloned().unwrap_or_else(|| json!([]));
                (due, to)
            }),
            expires_at: part.expires_at(),
            on_expire: interrupt
                .get(ON_EXPIRE)
                .and_then(Value::as_str)
                .and_then(OnExpire::parse)
                .unwrap_or_default(),
        }
    }

    /// The timer rows, each with its own copy of the hold's `data`.
    fn events(self, data: &Value, event: &impl Fn(&str, Value, DateTime<Utc>) -> OutboxEvent) -> Vec<OutboxEvent> {
        let mut timers = Vec::new();
        if let Some(due) = self.remind_at {
            timers.push(event(HOLD_REMINDED, data.clone(), due).as_timer());
        }
        if let Some((due, to)) = self.escalation {
            let mut escalated = data.clone();
            let mut roles: Vec<Value> = escalated
                .get(APPROVERS)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for extra in to.as_array().into_iter().flatten() {
                if !roles.contains(extra) {
                    roles.push(extra.clone());
                }
            }
            if let Some(obj) = escalated.as_object_mut() {
                obj.insert(APPROVERS.into(), Value::Array(roles));
                obj.insert(ESCALATE_TO.into(), to);
            }
            timers.push(event(HOLD_ESCALATED, escalated, due).as_timer());
        }
        if let Some(due) = self.expires_at {
            let mut expired = data.clone();
            if let Some(obj) = expired.as_object_mut() {
                obj.insert(ON_EXPIRE.into(), Value::String(self.on_expire.as_str().into()));
            }
            timers.push(event(HOLD_EXPIRED, expired, due).as_timer());
        }
        timers
    }
}

/// How deep [`nested_calls`] follows surfaced holds (a bound on what a
/// stored row can make it do; real trees are a few levels).
const MAX_NESTING: usize = 16;

/// Whether `state` is a foreground sub-agent's session: its first message
/// links it to a parent call, not as a background task.
fn runs_as_subagent(state: &crate::session::SessionState) -> bool {
    state
        .messages
        .first()
        .and_then(|m| m.metadata.as_ref())
        .and_then(|m| m.get(metadata::SUBAGENT_OF))
        .is_some_and(|link| link.get("background") != Some(&Value::Bool(true)))
}

/// The calls a paused `part` stands for: itself, or for a surfaced
/// sub-agent hold the child's paused calls (to any depth), each carrying
/// the compound ref it is answered by (as listings show it).
fn nested_calls<'a>(part: Cow<'a, Part>, depth: usize, out: &mut Vec<Cow<'a, Part>>) {
    let inner = metadata::marker_object(part.metadata.as_ref(), metadata::INTERRUPT)
        .and_then(|d| d.get(metadata::SUBAGENT))
        .and_then(|h| h.get("interrupts"))
        .and_then(Value::as_array);
    let (Some(inner), true) = (inner, depth < MAX_NESTING) else {
        out.push(part);
        return;
    };
    let prefix = part.ref_segment().unwrap_or_default();
    for value in inner {
        let Ok(mut child) = Part::deserialize(value) else {
            continue;
        };
        let compound = format!(
            "{prefix}{}{}",
            metadata::REF_SEPARATOR,
            child.ref_segment().unwrap_or_default()
        );
        if let Some(req) = child.as_tool_request_mut() {
            req.reference = Some(compound);
        }
        nested_calls(Cow::Owned(child), depth + 1, out);
    }
}

/// The events a store writes with a resume claim carrying `audit` (the
/// decisions about the claimed snapshot's calls), claimed until
/// `lease_until`: a `hold.decided` per decision, and one `hold.in_doubt`
/// timer at `lease_until`, which the worker pushes back while the lease is
/// renewed and cancels once the resume wrote its outcome.
pub fn decided_events(snapshot_id: &str, lease_until: DateTime<Utc>, audit: &[AuditRecord]) -> Vec<OutboxEvent> {
    let Some(first) = audit.first() else {
        return Vec::new();
    };
    let now = Utc::now();
    let decisions: Vec<Value> = audit.iter().map(decision_json).collect();
    let mut out: Vec<OutboxEvent> = audit
        .iter()
        .zip(&decisions)
        .map(|(r, decision)| {
            let data = json!({
                "agent": r.agent,
                "sessionId": r.session_id,
                "snapshotId": r.snapshot_id,
                "ref": r.reference,
                "tool": r.tool,
                "input": r.input.clone().unwrap_or(Value::Null),
                "interrupt": Value::Null,
                "approvers": [],
                "decisions": [decision.clone()],
            });
            OutboxEvent::new(HOLD_DECIDED, snapshot_id, &r.session_id, r.agent.as_deref(), data, now)
        })
        .collect();
    let data = json!({
        "agent": first.agent,
        "sessionId": first.session_id,
        "snapshotId": snapshot_id,
        "ref": Value::Null,
        "tool": Value::Null,
        "input": Value::Null,
        "interrupt": Value::Null,
        "approvers": [],
        "decisions": decisions,
    });
    out.push(
        OutboxEvent::new(
            HOLD_IN_DOUBT,
            snapshot_id,
            &first.session_id,
            first.agent.as_deref(),
            data,
            lease_until,
        )
        .as_timer(),
    );
    out
}

/// The event of an approval that does not yet complete a hold's quorum:
/// the hook the quorum's store path writes in the transaction that records
/// the approval. `decisions` are the approvals so far.
pub fn partial_approval_event(
    row: &Snapshot,
    reference: Option<&str>,
    tool: &str,
    decisions: &[AuditRecord],
) -> OutboxEvent {
    let data = json!({
        "agent": row.agent,
        "sessionId": row.session_id,
        "snapshotId": row.snapshot_id,
        "ref": reference,
        "tool": tool,
        "input": Value::Null,
        "interrupt": Value::Null,
        "approvers": [],
        "decisions": decisions.iter().map(decision_json).collect::<Vec<_>>(),
    });
    OutboxEvent::new(
        HOLD_PARTIALLY_APPROVED,
        &row.snapshot_id,
        &row.session_id,
        row.agent.as_deref(),
        data,
        Utc::now(),
    )
}

fn decision_json(r: &AuditRecord) -> Value {
    json!({
        "decision": r.decision.as_str(),
        "actor": r.actor,
        "principal": r.principal,
        "reason": r.reason,
        "at": rfc3339(r.at),
        "ref": r.reference,
        "tool": r.tool,
    })
}
