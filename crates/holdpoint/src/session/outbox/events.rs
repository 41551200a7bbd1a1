//! The rows a store writes in the transaction of the change they report:
//! a hold's `hold.created` and timers, and their payload, built from the
//! held snapshot (at the write, or again at delivery).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::event::OutboxEvent;
use super::timers::{OnExpire, parse_time, rfc3339};
use super::{
    APPROVERS, ESCALATE_AT, ESCALATE_TO, HOLD_CREATED, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_REMINDED, ON_EXPIRE,
    REMIND_AT,
};
use crate::message::{Part, ToolRequest, metadata};
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
    let now = Utc::now();
    let mut out = Vec::new();
    for part in &held_calls(row) {
        call_events(row, part, now, &mut out);
    }
    out
}

/// The calls `row`'s hold stands for, as its events tell them (see
/// [`hold_events`]): nothing for a foreground sub-agent's row.
pub(super) fn held_calls(row: &Snapshot) -> Vec<Cow<'_, Part>> {
    let mut calls = Vec::new();
    let Some(state) = row.state.as_ref() else {
        return calls;
    };
    if runs_as_subagent(state) {
        return calls;
    }
    let Some(last) = state.messages.last() else {
        return calls;
    };
    for part in last.interrupts() {
        nested_calls(Cow::Borrowed(part), 0, &mut calls);
    }
    calls
}

/// The `hold.created` event of the paused call `part` of `row`, then the
/// timer rows its interrupt data asks for.
fn call_events(row: &Snapshot, part: &Part, now: DateTime<Utc>, out: &mut Vec<OutboxEvent>) {
    let Some(req) = part.as_tool_request() else { return };
    let interrupt = part.interrupt_data().unwrap_or_default();
    // What the timers need is read before the interrupt moves into the
    // event's data.
    let timers = Timers::of(part, Some(&interrupt));
    let data = hold_data(row, part, req, interrupt, timers.expires_at);
    let event = |kind: &str, data: Value, due: DateTime<Utc>| {
        OutboxEvent::new(kind, &row.snapshot_id, &row.session_id, row.agent.as_deref(), data, due)
    };
    // Each timer copies the data; `hold.created` takes it.
    let mut timer_events = Vec::new();
    for (kind, due) in timers.dues() {
        timer_events.push(event(kind, timers.data(kind, data.clone()), due).as_timer());
    }
    out.push(event(HOLD_CREATED, data, now));
    out.append(&mut timer_events);
}

/// The payload's `data` of the `kind` event about the paused call `call`
/// of `row` (its index among the calls the hold stands for, as
/// [`hold_stubs`] numbers them): what [`hold_events`] writes, built again
/// from the same row. `None` when `row` holds no such call. Neither the
/// calls nor the data read the claim fields, so a claim since changes
/// nothing; a row rewritten in place (an escalation records its added
/// roles on the hold) would, so a store that builds payloads at delivery
/// builds those of the row's events before it rewrites the row.
pub fn call_payload(kind: &str, row: &Snapshot, call: usize) -> Option<Value> {
    let calls = held_calls(row);
    let part = calls.get(call)?;
    let req = part.as_tool_request()?;
    let interrupt = part.interrupt_data().unwrap_or_default();
    let timers = Timers::of(part, Some(&interrupt));
    let data = hold_data(row, part, req, interrupt, timers.expires_at);
    Some(if kind == HOLD_CREATED {
        data
    } else {
        timers.data(kind, data)
    })
}

/// The rows [`hold_events`] writes for a save of `row`, as kind, call and
/// due only: `(kind, the call's index, due)`, in the same order. A store
/// that keeps these builds each payload at delivery with
/// [`call_payload`].
pub fn hold_stubs(was_waiting: bool, row: &Snapshot) -> Vec<(&'static str, usize, DateTime<Utc>)> {
    if was_waiting || !row.is_waiting() || row.is_state_claim() {
        return Vec::new();
    }
    let now = Utc::now();
    let mut out = Vec::new();
    for (call, part) in held_calls(row).iter().enumerate() {
        if part.as_tool_request().is_none() {
            continue;
        }
        let interrupt = if part.is_interrupt() {
            metadata::marker_object(part.metadata.as_ref(), metadata::INTERRUPT)
        } else {
            None
        };
        let timers = Timers::of(part, interrupt);
        out.push((HOLD_CREATED, call, now));
        out.extend(timers.dues().map(|(kind, due)| (kind, call, due)));
    }
    out
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
    fn of(part: &Part, interrupt: Option<&Map<String, Value>>) -> Timers {
        let get = |key: &str| interrupt.and_then(|i| i.get(key));
        let at = |key: &str| get(key).and_then(Value::as_str).and_then(parse_time);
        Timers {
            remind_at: at(REMIND_AT),
            escalation: at(ESCALATE_AT).map(|due| {
                let to = get(ESCALATE_TO).cloned().unwrap_or_else(|| json!([]));
                (due, to)
            }),
            expires_at: part.expires_at(),
            on_expire: get(ON_EXPIRE)
                .and_then(Value::as_str)
                .and_then(OnExpire::parse)
                .unwrap_or_default(),
        }
    }

    /// The timer rows' kinds and dues, in the order they are written.
    fn dues(&self) -> impl Iterator<Item = (&'static str, DateTime<Utc>)> {
        let remind = self.remind_at.map(|due| (HOLD_REMINDED, due));
        let escalate = self.escalation.as_ref().map(|(due, _)| (HOLD_ESCALATED, *due));
        let expire = self.expires_at.map(|due| (HOLD_EXPIRED, due));
        remind.into_iter().chain(escalate).chain(expire)
    }

    /// The data of the timer row `kind`, from the hold's `data`: an
    /// escalation adds its roles to the approvers, an expiry says what it
    /// does.
    fn data(&self, kind: &str, mut data: Value) -> Value {
        match kind {
            HOLD_ESCALATED => {
                let to = self.escalation.as_ref().map_or_else(|| json!([]), |(_, to)| to.clone());
                let mut roles: Vec<Value> = data
                    .get(APPROVERS)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for extra in to.as_array().into_iter().flatten() {
                    if !roles.contains(extra) {
                        roles.push(extra.clone());
                    }
                }
                if let Some(obj) = data.as_object_mut() {
                    obj.insert(APPROVERS.into(), Value::Array(roles));
                    obj.insert(ESCALATE_TO.into(), to);
                }
            }
            HOLD_EXPIRED => {
                if let Some(obj) = data.as_object_mut() {
                    obj.insert(ON_EXPIRE.into(), Value::String(self.on_expire.as_str().into()));
                }
            }
            _ => {}
        }
        data
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
