//! The part-metadata keys that carry interrupt state (docs/reference.md §2), and the only
//! code that knows their spelling.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Part metadata: an arbitrary JSON object.
pub type Metadata = Map<String, Value>;

/// `toolRequest`: paused, not yet answered (interrupt data or `true`).
pub const INTERRUPT: &str = "interrupt";
/// `toolRequest`: was paused and has been answered.
pub const RESOLVED_INTERRUPT: &str = "resolvedInterrupt";
/// `toolRequest`: the middleware that raised the hold.
pub const INTERRUPTED_BY: &str = "interruptedBy";
/// `toolRequest`: a restart directive (resume data or `true`).
pub const RESUMED: &str = "resumed";
/// `toolRequest`: on a restart with new input, the original input.
pub const REPLACED_INPUT: &str = "replacedInput";
/// `toolResponse`: a respond directive.
pub const INTERRUPT_RESPONSE: &str = "interruptResponse";
/// `toolRequest`: output of a call that finished while a sibling paused.
pub const PENDING_OUTPUT: &str = "pendingOutput";
/// `toolResponse`: `"pending"` when made from `pendingOutput`.
pub const SOURCE: &str = "source";
/// `toolResponse`: a streamed partial result.
pub const PARTIAL: &str = "partial";
/// `toolRequest`: when an interrupt stops being answerable (RFC 3339).
pub const EXPIRES_AT: &str = "expiresAt";
/// `toolRequest`: the approval rule that governs a paused call (its name,
/// approver roles, quorum, whether the owner may answer; an evaluation
/// error when the rule's condition failed), docs/reference.md §10.5.
pub const APPROVAL_RULE: &str = "approvalRule";
/// `toolRequest`: how a resumable tool's resume data says yes or no (the
/// data that approves, the data that denies, the key of the reason).
pub const APPROVAL_REPLY: &str = "approvalReply";
/// `toolRequest` (a restart directive): the session's owner withdrew
/// the request (`true`); a denial so marked is audited `withdraw` and
/// may come from the owner even when the rule refuses them an answer.
pub const WITHDRAWN: &str = "withdrawn";
/// `toolRequest`: the paths of the call's input that every surface masks
/// (an array of strings), docs/reference.md §22.1.
pub const REDACT: &str = "redact";
/// `toolRequest`: the tool's preview of the held call (or `{"error": …}`
/// when it could not make one), docs/reference.md §22.2.
pub const PREVIEW: &str = "preview";
/// `toolRequest`: why the held call cannot be approved as is (only a
/// denial or an edit answers it), docs/reference.md §22.3.
pub const UNAPPROVABLE: &str = "unapprovable";
/// The interrupt-data keys that carry [`APPROVAL_RULE`],
/// [`APPROVAL_REPLY`], [`REDACT`], [`PREVIEW`] and [`UNAPPROVABLE`] from
/// a tool or middleware to the paused part; the generate loop moves them
/// out of the interrupt data into the part's metadata, so the interrupt
/// data stays the tool's own.
pub const CARRIED_META: [(&str, &str); 5] = [
    ("holdpoint:approvalRule", APPROVAL_RULE),
    ("holdpoint:approvalReply", APPROVAL_REPLY),
    ("holdpoint:redact", REDACT),
    ("holdpoint:preview", PREVIEW),
    ("holdpoint:unapprovable", UNAPPROVABLE),
];
/// Resume data (under [`RESUMED`]): approves (`true`) or denies (`false`)
/// an approval gate's hold.
pub const TOOL_APPROVED: &str = "toolApproved";

/// The key of a surfaced sub-agent hold in a paused call's interrupt data
/// (docs/reference.md §16.2).
pub const SUBAGENT: &str = "subagent";

/// The key, on the first user message of a sub-agent's session, of its
/// link to the parent (docs/reference.md §16.1).
pub const SUBAGENT_OF: &str = "subagentOf";

/// The separator of a nested call's compound ref (docs/reference.md §16.2).
pub const REF_SEPARATOR: char = '/';

/// A metadata marker that is either set without data (`true`) or set with a
/// JSON object. Absent, `null` and `false` mean "not set".
#[derive(Debug, Clone, PartialEq)]
pub enum Marker {
    /// `true`: the state holds, with no data.
    Flag,
    /// The state holds, with this data object.
    Data(Map<String, Value>),
}

impl Marker {
    /// The data object, or an empty object for a bare flag.
    pub fn into_object(self) -> Map<String, Value> {
        match self {
            Marker::Flag => Map::new(),
            Marker::Data(map) => map,
        }
    }

    /// The JSON value to store under the key.
    pub fn to_value(&self) -> Value {
        match self {
            Marker::Flag => Value::Bool(true),
            Marker::Data(map) => Value::Object(map.clone()),
        }
    }

    /// Builds a marker from optional data: `None` is a bare flag; data must
    /// serialise to a JSON object (or `true`).
    pub fn from_data(key: &str, data: Option<Value>) -> Result<Marker> {
        match data {
            None | Some(Value::Bool(true)) => Ok(Marker::Flag),
            Some(Value::Object(map)) => Ok(Marker::Data(map)),
            Some(other) => Err(not_an_object(key, &other)),
        }
    }
}

fn not_an_object(key: &str, value: &Value) -> Error {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Error::InvalidArgument(format!("metadata \"{key}\" must be a JSON object or true, got {kind}"))
}

/// Reads a marker key: `Ok(None)` when absent, null or false.
pub fn marker(meta: Option<&Metadata>, key: &str) -> Result<Option<Marker>> {
    match meta.and_then(|m| m.get(key)) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(Marker::Flag)),
        Some(Value::Object(map)) => Ok(Some(Marker::Data(map.clone()))),
        Some(other) => Err(not_an_object(key, other)),
    }
}

/// Whether a key is set to something other than absent, null or false.
pub fn is_set(meta: Option<&Metadata>, key: &str) -> bool {
    !matches!(
        meta.and_then(|m| m.get(key)),
        None | Some(Value::Null) | Some(Value::Bool(false))
    )
}

/// Checks the marker keys of a decoded part: interrupt and resume data must
/// be JSON objects (or `true`).
pub fn validate(meta: &Metadata) -> Result<()> {
    for key in [INTERRUPT, RESUMED, INTERRUPT_RESPONSE, RESOLVED_INTERRUPT] {
        // The shape only: nothing is copied (every decoded part passes here).
        match meta.get(key) {
            None | Some(Value::Null | Value::Bool(_) | Value::Object(_)) => {}
            Some(other) => return Err(not_an_object(key, other)),
        }
    }
    Ok(())
}

/// The data object of a marker key, borrowed: `None` when absent, not set,
/// a bare flag, or not an object.
pub fn marker_object<'a>(meta: Option<&'a Metadata>, key: &str) -> Option<&'a Map<String, Value>> {
    meta?.get(key)?.as_object()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Metadata {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn absent_null_false_mean_no_state() {
        for v in [json!({}), json!({"interrupt": null}), json!({"interrupt": false})] {
            assert_eq!(marker(Some(&meta(v)), INTERRUPT).unwrap(), None);
        }
        assert_eq!(
            marker(Some(&meta(json!({"interrupt": true}))), INTERRUPT).unwrap(),
            Some(Marker::Flag)
        );
    }

    #[test]
    fn non_object_data_is_rejected_with_key_name() {
        let err = validate(&meta(json!({"resumed": "yes"}))).unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument);
        assert!(err.to_string().contains("\"resumed\""), "{err}");
        assert!(err.to_string().contains("a string"), "{err}");
    }
}
