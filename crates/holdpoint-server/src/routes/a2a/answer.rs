//! Answers to a task's holds: the data parts of a `SendMessage` on an
//! `input-required` task, each `{"holdId"?, "approve": true, "input"?}`,
//! `{"holdId"?, "deny": "reason" | true}` or `{"holdId"?, "respond":
//! {...}}`, become AG-UI resume entries and go through the same planning
//! (every open hold answered, each once, payloads against their schema,
//! expiry), so both protocols refuse the same things.

use holdpoint::agent::PendingApproval;
use holdpoint::generate::Resume;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::RpcError;
use super::task::input_schema;
use crate::routes::agui::resume::{self, EDITED_ARGS, EntryStatus, ResumeEntry};

/// One answer, the data of one part.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AnswerData {
    /// The hold it answers; may be left out when one hold is open.
    #[serde(default)]
    hold_id: Option<String>,
    /// Approve (or, `false`, deny without a reason).
    #[serde(default)]
    approve: Option<bool>,
    /// With `approve`: run the call with this input instead.
    #[serde(default)]
    input: Option<Value>,
    /// Deny, with a reason string (or `true`).
    #[serde(default)]
    deny: Option<Value>,
    /// The hold's resume data (its `responseSchema`).
    #[serde(default)]
    respond: Option<Value>,
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::invalid_params("INVALID_ANSWER", message)
}

/// The resume entries of a message's data parts, answering `open`, the
/// open holds of snapshot `snapshot_id`.
pub(super) fn entries(
    snapshot_id: &str,
    open: &[PendingApproval],
    parts: &[Value],
) -> Result<Vec<ResumeEntry>, RpcError> {
    let data: Vec<&Value> = parts.iter().filter_map(|p| p.get("data")).collect();
    if data.is_empty() {
        return Err(RpcError::invalid_params(
            "HOLDS_PENDING",
            format!(
                "the task waits at {} hold(s); answer them with data parts ({{\"approve\": true}}, {{\"deny\": \"reason\"}} or {{\"respond\": {{…}}}})",
                open.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for d in data {
        let answer: AnswerData =
            serde_json::from_value(d.clone()).map_err(|e| invalid(format!("an answer does not read: {e}")))?;
        let hold_id = match (answer.hold_id, open) {
            (Some(id), _) => id,
            (None, [only]) if !out.is_empty() => {
                return Err(invalid(format!(
                    "two answers for the one open hold {}",
                    resume::interrupt_id(snapshot_id, only)
                )));
            }
            (None, [only]) => resume::interrupt_id(snapshot_id, only),
            (None, _) => {
                return Err(invalid(format!(
                    "{} holds are open: name each answer's holdId",
                    open.len()
                )));
            }
        };
        let chosen = [
            answer.approve.is_some(),
            answer.deny.is_some(),
            answer.respond.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if chosen != 1 {
            return Err(invalid(format!(
                "answer {hold_id}: give exactly one of approve, deny, respond"
            )));
        }
        if answer.input.is_some() && answer.approve != Some(true) {
            return Err(invalid(format!("answer {hold_id}: input goes with approve: true")));
        }
        let entry = match (answer.approve, answer.deny, answer.respond) {
            (Some(true), _, _) => ResumeEntry {
                interrupt_id: hold_id,
                status: EntryStatus::Resolved,
                payload: answer.input.map(|i| json!({ EDITED_ARGS: i })),
                metadata: None,
            },
            (Some(false), _, _) => deny(hold_id, None),
            (_, Some(Value::String(reason)), _) => deny(hold_id, Some(reason)),
            (_, Some(Value::Bool(true)), _) => deny(hold_id, None),
            (_, Some(other), _) => {
                return Err(invalid(format!(
                    "answer {hold_id}: deny is a reason string or true, not {other}"
                )));
            }
            (_, _, respond) => ResumeEntry {
                interrupt_id: hold_id,
                status: EntryStatus::Resolved,
                payload: respond,
                metadata: None,
            },
        };
        out.push(entry);
    }
    Ok(out)
}

/// A denial entry.
pub(super) fn deny(hold_id: String, reason: Option<String>) -> ResumeEntry {
    let metadata = reason.map(|r| {
        let mut m = Map::new();
        m.insert("reason".into(), Value::String(r));
        m
    });
    ResumeEntry {
        interrupt_id: hold_id,
        status: EntryStatus::Cancelled,
        payload: None,
        metadata,
    }
}

/// The directives of `entries`, or the refusal as invalid parameters
/// (its AG-UI code the reason).
pub(super) fn plan(
    agent: &holdpoint::agent::Agent,
    snapshot_id: &str,
    open: &[PendingApproval],
    entries: &[ResumeEntry],
) -> Result<Resume, RpcError> {
    resume::plan(snapshot_id, open, entries, |c| input_schema(agent, c))
        .map_err(|r| RpcError::invalid_params(r.code, r.message))
}
