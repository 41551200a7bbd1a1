//! The resume data that answers a remote task's question, and the A2A
//! parts it becomes (docs/reference.md §21.6).
//!
//! | resume data | sent to the remote task |
//! |---|---|
//! | `{"approved": true}` (or `toolApproved`) | a data part approving each Holdpoint hold the question named (`{"holdId", "approve": true}`), or `{"approved": true}` for another agent |
//! | `{"approved": false, "reason"?}`, or a bare restart | `CancelTask`; the call fails with the reason |
//! | `{"respond": {...}}` | `{"holdId", "respond": {...}}` for the one Holdpoint hold, or `{"respond": {...}}` |
//! | `{"text": "..."}` | a text part |
//! | `{"data": {...}}` | that data part, as is |

use holdpoint::approval::ReplyShape;
use serde_json::{Map, Value, json};

/// What the person answered to a remote task's question.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Yes: the remote task goes on.
    Approve,
    /// No: the remote task is canceled and the call fails, with the reason.
    Deny(Option<String>),
    /// A response to the remote hold (Holdpoint's `respond`).
    Respond(Value),
    /// A text answer.
    Text(String),
    /// A data part sent as is.
    Data(Map<String, Value>),
}

impl Reply {
    /// Reads resume data; the error says what is wrong.
    pub fn parse(resumed: &Map<String, Value>) -> Result<Reply, String> {
        let verbs: Vec<&str> = ["approved", "toolApproved", "respond", "text", "data"]
            .into_iter()
            .filter(|k| resumed.get(*k).is_some_and(|v| !v.is_null()))
            .collect();
        let reason = match resumed.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => return Err(format!("resume data: `reason` must be a string, got {other}")),
        };
        match verbs.as_slice() {
            [] => Ok(Reply::Deny(reason)),
            [k @ ("approved" | "toolApproved")] => match resumed.get(*k) {
                Some(Value::Bool(true)) => Ok(Reply::Approve),
                Some(Value::Bool(false)) => Ok(Reply::Deny(reason)),
                Some(other) => Err(format!("resume data: `{k}` must be a boolean, got {other}")),
                None => Err(format!("resume data: `{k}` is missing")),
            },
            ["respond"] => Ok(Reply::Respond(resumed.get("respond").cloned().unwrap_or(Value::Null))),
            ["text"] => match resumed.get("text") {
                Some(Value::String(s)) => Ok(Reply::Text(s.clone())),
                other => Err(format!("resume data: `text` must be a string, got {other:?}")),
            },
            ["data"] => match resumed.get("data") {
                Some(Value::Object(m)) => Ok(Reply::Data(m.clone())),
                other => Err(format!("resume data: `data` must be an object, got {other:?}")),
            },
            many => Err(format!("resume data: give one of {}, not several", many.join(", "))),
        }
    }

    /// The message parts that carry this answer, given the data parts of
    /// the question (`None` for a denial, which cancels instead).
    pub fn parts(&self, question: &[Value]) -> Option<Vec<Value>> {
        let holds: Vec<&str> = question
            .iter()
            .filter(|d| d.get("kind").and_then(Value::as_str) == Some("holdpoint.hold"))
            .filter_map(|d| d.get("holdId").and_then(Value::as_str))
            .collect();
        Some(match self {
            Reply::Deny(_) => return None,
            Reply::Approve if holds.is_empty() => vec![json!({"data": {"approved": true}})],
            Reply::Approve => holds
                .iter()
                .map(|h| json!({"data": {"holdId": h, "approve": true}}))
                .collect(),
            Reply::Respond(v) => match holds.as_slice() {
                [one] => vec![json!({"data": {"holdId": one, "respond": v}})],
                _ => vec![json!({"data": {"respond": v}})],
            },
            Reply::Text(t) => vec![json!({"text": t})],
            Reply::Data(d) => vec![json!({"data": d})],
        })
    }
}

/// How this crate's holds say yes or no (`{"approved": true}` /
/// `{"approved": false, "reason": …}`), so an approver's approve and deny
/// (`holdpoint approve`, the inbox, `POST /agents/{name}/answer`) answer
/// them.
pub fn reply_shape() -> ReplyShape {
    let obj = |approved: bool| {
        let mut m = Map::new();
        m.insert("approved".into(), Value::Bool(approved));
        m
    };
    ReplyShape {
        approve: obj(true),
        deny: obj(false),
        reason: Some("reason".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn reads_every_verb_and_refuses_two() {
        assert_eq!(Reply::parse(&obj(json!({"approved": true}))), Ok(Reply::Approve));
        assert_eq!(
            Reply::parse(&obj(json!({"approved": false, "reason": "no"}))),
            Ok(Reply::Deny(Some("no".into())))
        );
        assert_eq!(Reply::parse(&obj(json!({}))), Ok(Reply::Deny(None)));
        assert_eq!(
            Reply::parse(&obj(json!({"text": "yes"}))),
            Ok(Reply::Text("yes".into()))
        );
        assert!(Reply::parse(&obj(json!({"text": "yes", "approved": true}))).is_err());
        assert!(Reply::parse(&obj(json!({"approved": "yes"}))).is_err());
    }

    #[test]
    fn approvals_name_the_remote_holds() {
        let q = [json!({"kind": "holdpoint.hold", "holdId": "s#r"})];
        assert_eq!(
            Reply::Approve.parts(&q),
            Some(vec![json!({"data": {"holdId": "s#r", "approve": true}})])
        );
        assert_eq!(
            Reply::Approve.parts(&[]),
            Some(vec![json!({"data": {"approved": true}})])
        );
        assert_eq!(Reply::Deny(None).parts(&q), None);
    }
}
