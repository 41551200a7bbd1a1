//! AG-UI resume entries onto Holdpoint directives: which paused call an
//! interrupt id names, the JSON Schema its answer must meet, and the
//! restart each entry becomes. Everything here only reads: a refusal
//! leaves the hold as it was.

use std::collections::BTreeMap;

use holdpoint::agent::{PendingApproval, TOOL_APPROVED};
use holdpoint::generate::Resume;
use holdpoint::tool::SchemaValidator;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The payload key of approve-with-edits: the call's new input.
pub(crate) const EDITED_ARGS: &str = "editedArgs";

/// Separates the snapshot id from the call's ref in an interrupt id.
const SEPARATOR: char = '#';

/// One entry of `RunAgentInput.resume`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    /// The interrupt it answers.
    pub(crate) interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub(crate) status: EntryStatus,
    /// The answer (for `resolved`).
    #[serde(default)]
    pub(crate) payload: Option<Value>,
    /// Free-form; a string `reason` here goes with a denial.
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// How an interrupt was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EntryStatus {
    /// Answered: restart with the payload.
    Resolved,
    /// Declined: deny.
    Cancelled,
}

/// Why a resume is refused: an AG-UI `RUN_ERROR` code and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub(crate) struct Refusal {
    /// The `RUN_ERROR` code.
    pub(crate) code: &'static str,
    /// For people.
    pub(crate) message: String,
}

impl Refusal {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// The id of a paused call of `snapshot_id`: the snapshot and the call's
/// ref (compound for a sub-agent's hold), unique across the thread, so an
/// answer given twice never lands on a later hold that reuses the ref.
pub(crate) fn interrupt_id(snapshot_id: &str, call: &PendingApproval) -> String {
    let reference = call.reference.as_deref().unwrap_or(&call.tool);
    format!("{snapshot_id}{SEPARATOR}{reference}")
}

/// The snapshot an interrupt id names.
pub(crate) fn snapshot_of(id: &str) -> Option<&str> {
    id.split_once(SEPARATOR).map(|(snapshot, _)| snapshot)
}

/// Whether a hold is answered yes or no: a ToolApproval hold or a tool
/// that declares an approval reply.
fn is_approval(call: &PendingApproval) -> bool {
    call.reply.is_some() || call.interrupted_by.is_some()
}

/// The JSON Schema of a `resolved` entry's payload for `call`: its resume
/// data (ToolApproval's `{toolApproved, reason}`, or the fields of the
/// tool's approval reply), plus `editedArgs`, the new input (`input_schema`
/// when the agent's own tool is known). A tool's own question with no
/// approval reply takes any object; its resume type decodes it on the
/// decision path.
pub(crate) fn response_schema(call: &PendingApproval, input_schema: Option<&Value>) -> Value {
    let mut properties = Map::new();
    let edited = input_schema.cloned().unwrap_or_else(|| json!({"type": "object"}));
    let mut closed = false;
    if let Some(shape) = &call.reply {
        let keys: std::collections::BTreeSet<&String> = shape.approve.keys().chain(shape.deny.keys()).collect();
        for key in keys {
            let (yes, no) = (shape.approve.get(key), shape.deny.get(key));
            let schema = match (yes, no) {
                (Some(Value::Bool(_)), Some(Value::Bool(_))) => json!({"type": "boolean"}),
                (Some(a), Some(b)) => json!({"enum": [a, b]}),
                _ => json!({}),
            };
            properties.insert(key.clone(), schema);
        }
        if let Some(reason) = &shape.reason {
            properties.insert(reason.clone(), json!({"type": "string"}));
        }
    } else if call.interrupted_by.is_some() {
        properties.insert(TOOL_APPROVED.to_owned(), json!({"type": "boolean"}));
        properties.insert("reason".to_owned(), json!({"type": "string"}));
        closed = true;
    }
    properties.insert(EDITED_ARGS.to_owned(), edited);
    let mut schema = json!({"type": "object", "properties": properties});
    if closed {
        schema["additionalProperties"] = Value::Bool(false);
    }
    schema
}

/// The resume data that approves or denies `call` (with `reason`), when
/// it is answered yes or no.
fn yes_no(call: &PendingApproval, approve: bool, reason: Option<&str>) -> Option<Map<String, Value>> {
    if let Some(shape) = &call.reply {
        return Some(shape.answer(approve, reason));
    }
    call.interrupted_by.as_ref()?;
    let mut data = Map::new();
    data.insert(TOOL_APPROVED.to_owned(), Value::Bool(approve));
    if let Some(r) = reason {
        data.insert("reason".to_owned(), Value::String(r.to_owned()));
    }
    Some(data)
}

/// The directives answering `calls` (the open holds of the thread's latest
/// snapshot `snapshot_id`) with `entries`, or why not. `input_schema`
/// gives a call's tool's input schema when known.
pub(crate) fn plan(
    snapshot_id: &str,
    calls: &[PendingApproval],
    entries: &[ResumeEntry],
    input_schema: impl Fn(&PendingApproval) -> Option<Value>,
) -> Result<Resume, Refusal> {
    let open: BTreeMap<String, &PendingApproval> = calls.iter().map(|c| (interrupt_id(snapshot_id, c), c)).collect();
    let mut answered: BTreeMap<&str, &ResumeEntry> = BTreeMap::new();
    for entry in entries {
        if !open.contains_key(&entry.interrupt_id) {
            return Err(Refusal::new(
                "UNKNOWN_INTERRUPT",
                format!("interrupt {} is not open on this thread", entry.interrupt_id),
            ));
        }
        if answered.insert(&entry.interrupt_id, entry).is_some() {
            return Err(Refusal::new(
                "DUPLICATE_INTERRUPT",
                format!("interrupt {} is answered twice", entry.interrupt_id),
            ));
        }
    }
    let missing: Vec<&str> = open
        .keys()
        .map(String::as_str)
        .filter(|id| !answered.contains_key(id))
        .collect();
    if !missing.is_empty() {
        return Err(Refusal::new(
            "PARTIAL_RESUME",
            format!(
                "a resume must answer every open interrupt; missing {}",
                missing.join(", ")
            ),
        ));
    }
    let mut parts = Vec::new();
    for (id, call) in &open {
        let entry = answered[id.as_str()];
        parts.push(directive(id, call, entry, input_schema(call).as_ref())?);
    }
    Ok(Resume::from_parts(parts))
}

/// The directive of one entry.
fn directive(
    id: &str,
    call: &PendingApproval,
    entry: &ResumeEntry,
    input_schema: Option<&Value>,
) -> Result<holdpoint::message::Part, Refusal> {
    let invalid = |e: holdpoint::Error| Refusal::new("INVALID_ARGUMENT", format!("interrupt {id}: {e}"));
    let reason = entry
        .metadata
        .as_ref()
        .and_then(|m| m.get("reason"))
        .and_then(Value::as_str);
    match entry.status {
        EntryStatus::Cancelled => {
            let Some(data) = yes_no(call, false, reason) else {
                return Err(Refusal::new(
                    "CANNOT_CANCEL",
                    format!(
                        "interrupt {id}: {} asks its own question and declares no approval reply, so it cannot be cancelled; resolve it with its resume data",
                        call.tool
                    ),
                ));
            };
            call.part.restart(Some(Value::Object(data))).map_err(invalid)
        }
        EntryStatus::Resolved => {
            if call.expired {
                let at = call
                    .expires_at
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_default();
                return Err(Refusal::new(
                    "INTERRUPT_EXPIRED",
                    format!("interrupt {id} expired at {at}; it can only be cancelled"),
                ));
            }
            let payload = match &entry.payload {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(map)) => map.clone(),
                Some(other) => {
                    return Err(Refusal::new(
                        "SCHEMA_MISMATCH",
                        format!("interrupt {id}: the payload must be a JSON object, got {other}"),
                    ));
                }
            };
            let schema = response_schema(call, input_schema);
            SchemaValidator::new(schema)
                .check(&format!("payload of interrupt {id}"), &Value::Object(payload.clone()))
                .map_err(|e| Refusal::new("SCHEMA_MISMATCH", e.to_string()))?;
            let mut data = payload;
            let edited = data.remove(EDITED_ARGS);
            if data.is_empty()
                && let Some(yes) = yes_no(call, true, reason)
            {
                data = yes;
            }
            let data = (!data.is_empty() || is_approval(call)).then_some(Value::Object(data));
            match edited {
                Some(input) => call.part.restart_with_input(input, data).map_err(invalid),
                None => call.part.restart(data).map_err(invalid),
            }
        }
    }
}
