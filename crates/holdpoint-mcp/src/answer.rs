//! The interrupt data of an MCP hold and the resume data that answers it
//! (docs/reference.md §17.4).
//!
//! Every hold this crate raises has interrupt data
//! `{"message": …, "mcp": {"type": …, "server": …, "tool": …, …}}`:
//! `type` is `"elicitation"` for a server's question during a live call and
//! `"inputRequired"` for a stateless `input_required` result. An answer is
//! `{"action": "accept", "content": {…}}`, `{"action": "decline"}` or
//! `{"action": "cancel"}`; a bare restart is `cancel`, an approval's
//! answer (`toolApproved` or `approved`) is accept without content when
//! `true` and decline when `false`. Several questions of one
//! `input_required` result are answered under `responses`, by key.

use std::collections::BTreeMap;

use holdpoint::tool::SchemaValidator;
use serde_json::{Map, Value, json};

/// The key of this crate's part of an interrupt's data.
pub const MCP_KEY: &str = "mcp";
/// `mcp.type` of a live elicitation.
pub const ELICITATION: &str = "elicitation";
/// `mcp.type` of a stateless `input_required` result.
pub const INPUT_REQUIRED: &str = "inputRequired";

/// What the user answered to one question.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accepted, with the content (form mode) or without (URL mode).
    Accept(Option<Map<String, Value>>),
    /// Declined.
    Decline,
    /// Dismissed.
    Cancel,
}

impl Answer {
    /// The `ElicitResult` JSON sent to the server.
    pub fn to_result(&self) -> Value {
        match self {
            Answer::Accept(Some(content)) => json!({"action": "accept", "content": content}),
            Answer::Accept(None) => json!({"action": "accept"}),
            Answer::Decline => json!({"action": "decline"}),
            Answer::Cancel => json!({"action": "cancel"}),
        }
    }

    /// `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        match self {
            Answer::Accept(_) => "accept",
            Answer::Decline => "decline",
            Answer::Cancel => "cancel",
        }
    }
}

/// Reads one answer from an object with `action` (and `content`).
fn one(map: &Map<String, Value>, at: &str) -> Result<Answer, String> {
    match map.get("action") {
        None | Some(Value::Null) => {
            if map.get("content").is_some_and(|c| !c.is_null()) {
                return Err(format!("{at}: `content` needs `\"action\": \"accept\"`"));
            }
            // An approval's answer (`holdpoint approve` / `deny`): approve
            // accepts without content, deny declines.
            let approved = map.get("toolApproved").or_else(|| map.get("approved"));
            Ok(match approved {
                Some(Value::Bool(true)) => Answer::Accept(None),
                Some(Value::Bool(false)) => Answer::Decline,
                _ => Answer::Cancel,
            })
        }
        Some(Value::String(a)) if a == "accept" => match map.get("content") {
            None | Some(Value::Null) => Ok(Answer::Accept(None)),
            Some(Value::Object(c)) => Ok(Answer::Accept(Some(c.clone()))),
            Some(other) => Err(format!("{at}: `content` must be an object, got {other}")),
        },
        Some(Value::String(a)) if a == "decline" || a == "cancel" => {
            if map.get("content").is_some_and(|c| !c.is_null()) {
                return Err(format!("{at}: `content` is only allowed with `\"action\": \"accept\"`"));
            }
            Ok(if a == "decline" {
                Answer::Decline
            } else {
                Answer::Cancel
            })
        }
        Some(other) => Err(format!(
            "{at}: `action` must be \"accept\", \"decline\" or \"cancel\", got {other}"
        )),
    }
}

/// The answers of a resume: either one answer, or answers by key.
#[derive(Debug, Clone, PartialEq)]
pub enum Answers {
    /// One answer (a live elicitation, or an `input_required` result with
    /// one question).
    One(Answer),
    /// Answers by input-request key.
    ByKey(BTreeMap<String, Answer>),
}

impl Answers {
    /// Parses resume data; the error says what is wrong.
    pub fn parse(resumed: &Map<String, Value>) -> Result<Answers, String> {
        match resumed.get("responses") {
            None | Some(Value::Null) => one(resumed, "resume data").map(Answers::One),
            Some(Value::Object(by_key)) => {
                if resumed.contains_key("action") {
                    return Err("resume data: give `action` or `responses`, not both".into());
                }
                let mut out = BTreeMap::new();
                for (k, v) in by_key {
                    let Value::Object(m) = v else {
                        return Err(format!("responses.{k}: must be an object with `action`"));
                    };
                    out.insert(k.clone(), one(m, &format!("responses.{k}"))?);
                }
                Ok(Answers::ByKey(out))
            }
            Some(other) => Err(format!("resume data: `responses` must be an object, got {other}")),
        }
    }
}

/// Checks an accepted form answer against the server's requested schema.
pub fn check_content(schema: &Value, answer: &Answer) -> Result<(), String> {
    if let Answer::Accept(content) = answer {
        let content = Value::Object(content.clone().unwrap_or_default());
        SchemaValidator::new(schema.clone())
            .check("elicitation content", &content)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// This crate's part of an interrupt's data, when it has one of `kind`.
pub fn mcp_part<'a>(data: Option<&'a Map<String, Value>>, kind: &str) -> Option<&'a Map<String, Value>> {
    let part = data?.get(MCP_KEY)?.as_object()?;
    (part.get("type")?.as_str()? == kind).then_some(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn parses_the_three_actions_and_the_fallbacks() {
        let content = obj(json!({"name": "Ada"}));
        assert_eq!(
            Answers::parse(&obj(json!({"action": "accept", "content": {"name": "Ada"}}))).unwrap(),
            Answers::One(Answer::Accept(Some(content)))
        );
        assert_eq!(
            Answers::parse(&obj(json!({"action": "decline"}))).unwrap(),
            Answers::One(Answer::Decline)
        );
        assert_eq!(Answers::parse(&obj(json!({}))).unwrap(), Answers::One(Answer::Cancel));
        assert_eq!(
            Answers::parse(&obj(json!({"toolApproved": false}))).unwrap(),
            Answers::One(Answer::Decline)
        );
        assert_eq!(
            Answers::parse(&obj(json!({"approved": true}))).unwrap(),
            Answers::One(Answer::Accept(None))
        );
        assert!(Answers::parse(&obj(json!({"action": "maybe"}))).is_err());
        assert!(Answers::parse(&obj(json!({"action": "decline", "content": {}}))).is_err());
        assert!(Answers::parse(&obj(json!({"action": "accept", "content": 5}))).is_err());
        let by_key = Answers::parse(&obj(json!({"responses": {"a": {"action": "cancel"}}}))).unwrap();
        assert_eq!(
            by_key,
            Answers::ByKey(BTreeMap::from([("a".to_owned(), Answer::Cancel)]))
        );
    }

    #[test]
    fn content_is_checked_against_the_requested_schema() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert!(check_content(&schema, &Answer::Accept(Some(obj(json!({"n": 2}))))).is_ok());
        let err = check_content(&schema, &Answer::Accept(Some(obj(json!({"n": "x"}))))).unwrap_err();
        assert!(err.contains("/n"), "{err}");
        assert!(check_content(&schema, &Answer::Decline).is_ok());
    }
}
