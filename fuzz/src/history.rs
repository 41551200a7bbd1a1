//! Histories and resume directives built from fuzzer bytes with
//! `arbitrary`: tool names and refs come from small alphabets so that
//! directives often meet the requests they name, and metadata keys come
//! from the interrupt vocabulary with values of every JSON kind (including
//! ones the decoder would refuse, as a store could hold them).

use arbitrary::Arbitrary;
use holdpoint::message::metadata;
use holdpoint::{Message, Part, Resume, Role};
use serde_json::{Map, Number, Value};

use crate::harness::TOOL_NAMES;

/// A whole case: a history and the directives that try to resume it.
#[derive(Debug, Arbitrary)]
pub struct Case {
    /// The history, oldest first.
    pub history: Vec<FMessage>,
    /// Restart directives (usually tool requests).
    pub restart: Vec<FPart>,
    /// Respond directives (usually tool responses).
    pub respond: Vec<FPart>,
    /// Derive the directives from the paused calls instead (the way clients
    /// build them), with these tweaks.
    pub derive: Option<Vec<Derive>>,
    /// Run the generation behind ToolApproval.
    pub approval: bool,
}

/// A directive built from the latest paused call the way a client would.
#[derive(Debug, Arbitrary)]
pub enum Derive {
    /// `part.restart(data)`.
    Restart(Option<FValue>),
    /// `part.restart_with_input(input, data)`.
    RestartWithInput(FValue, Option<FValue>),
    /// `part.respond(output)`.
    Respond(FValue),
    /// `{"toolApproved": b}` resume data, as the approval page sends it.
    Approve(bool),
}

/// A message.
#[derive(Debug, Arbitrary)]
pub struct FMessage {
    role: FRole,
    parts: Vec<FPart>,
    resumed_meta: bool,
}

#[derive(Debug, Arbitrary)]
enum FRole {
    User,
    Model,
    Tool,
    System,
}

/// A part.
#[derive(Debug, Arbitrary)]
pub enum FPart {
    /// Text.
    Text(String),
    /// A tool request.
    Request {
        /// Index into the tool names.
        name: u8,
        /// A ref from a small alphabet, or none.
        reference: Option<u8>,
        /// The input.
        input: Option<FValue>,
        /// Metadata entries.
        meta: Vec<(FKey, FValue)>,
    },
    /// A tool response.
    Response {
        /// Index into the tool names.
        name: u8,
        /// A ref from a small alphabet, or none.
        reference: Option<u8>,
        /// The output.
        output: Option<FValue>,
        /// Metadata entries.
        meta: Vec<(FKey, FValue)>,
    },
    /// A data part.
    Data(FValue),
}

/// A metadata key.
#[derive(Debug, Arbitrary)]
pub enum FKey {
    /// `interrupt`
    Interrupt,
    /// `resolvedInterrupt`
    ResolvedInterrupt,
    /// `interruptedBy`
    InterruptedBy,
    /// `resumed`
    Resumed,
    /// `replacedInput`
    ReplacedInput,
    /// `interruptResponse`
    InterruptResponse,
    /// `pendingOutput`
    PendingOutput,
    /// `source`
    Source,
    /// `expiresAt`
    ExpiresAt,
    /// Any other key.
    Other(String),
}

/// A JSON value, with the shapes that matter here made likely.
#[derive(Debug, Arbitrary)]
pub enum FValue {
    /// `null`
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (non-finite ones become null, as JSON has none).
    Float(f64),
    /// A string.
    Str(String),
    /// The approval gate's name.
    ApprovalName,
    /// An RFC 3339 time this many seconds from now.
    Time(i32),
    /// `{"toolApproved": b}`
    Approved(bool),
    /// An array.
    Array(Vec<FValue>),
    /// An object.
    Object(Vec<(String, FValue)>),
}

impl FValue {
    /// The JSON value.
    pub fn to_json(&self) -> Value {
        match self {
            FValue::Null => Value::Null,
            FValue::Bool(b) => Value::Bool(*b),
            FValue::Int(i) => Value::from(*i),
            FValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            FValue::Str(s) => Value::String(s.clone()),
            FValue::ApprovalName => Value::String(holdpoint::middleware::TOOL_APPROVAL.into()),
            FValue::Time(secs) => {
                let at = chrono::Utc::now() + chrono::Duration::seconds(i64::from(*secs));
                Value::String(at.to_rfc3339())
            }
            FValue::Approved(b) => {
                let mut m = Map::new();
                m.insert("toolApproved".into(), Value::Bool(*b));
                Value::Object(m)
            }
            FValue::Array(items) => Value::Array(items.iter().map(FValue::to_json).collect()),
            FValue::Object(entries) => Value::Object(entries.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }
}

impl FKey {
    fn as_str(&self) -> &str {
        match self {
            FKey::Interrupt => metadata::INTERRUPT,
            FKey::ResolvedInterrupt => metadata::RESOLVED_INTERRUPT,
            FKey::InterruptedBy => metadata::INTERRUPTED_BY,
            FKey::Resumed => metadata::RESUMED,
            FKey::ReplacedInput => metadata::REPLACED_INPUT,
            FKey::InterruptResponse => metadata::INTERRUPT_RESPONSE,
            FKey::PendingOutput => metadata::PENDING_OUTPUT,
            FKey::Source => metadata::SOURCE,
            FKey::ExpiresAt => metadata::EXPIRES_AT,
            FKey::Other(s) => s,
        }
    }
}

fn name(i: u8) -> String {
    TOOL_NAMES[usize::from(i) % TOOL_NAMES.len()].to_owned()
}

fn reference(r: Option<u8>) -> Option<String> {
    r.map(|r| format!("r{}", r % 4))
}

impl FPart {
    /// The part (metadata set directly, without the decoder's checks).
    pub fn to_part(&self) -> Part {
        let (mut part, meta) = match self {
            FPart::Text(t) => (Part::text(t.clone()), None),
            FPart::Data(v) => (Part::data(v.to_json()), None),
            FPart::Request {
                name: n,
                reference: r,
                input,
                meta,
            } => (
                Part::tool_request(name(*n), reference(*r), input.as_ref().map(FValue::to_json)),
                Some(meta),
            ),
            FPart::Response {
                name: n,
                reference: r,
                output,
                meta,
            } => (
                Part::tool_response(name(*n), reference(*r), output.as_ref().map(FValue::to_json)),
                Some(meta),
            ),
        };
        for (k, v) in meta.into_iter().flatten() {
            part.set_meta(k.as_str(), v.to_json());
        }
        part
    }
}

impl FMessage {
    /// The message.
    pub fn to_message(&self) -> Message {
        let role = match self.role {
            FRole::User => Role::User,
            FRole::Model => Role::Model,
            FRole::Tool => Role::Tool,
            FRole::System => Role::System,
        };
        let mut m = Message::new(role, self.parts.iter().map(FPart::to_part).collect());
        if self.resumed_meta {
            let mut meta = Map::new();
            meta.insert(metadata::RESUMED.into(), Value::Bool(true));
            m.metadata = Some(meta);
        }
        m
    }
}

impl Case {
    /// The history.
    pub fn history(&self) -> Vec<Message> {
        self.history.iter().map(FMessage::to_message).collect()
    }

    /// The directives: the given ones, plus ones derived from the paused
    /// calls of the latest model message.
    pub fn resume(&self, history: &[Message]) -> Resume {
        let mut parts: Vec<Part> = self.restart.iter().map(FPart::to_part).collect();
        let mut respond: Vec<Part> = self.respond.iter().map(FPart::to_part).collect();
        if let Some(tweaks) = &self.derive {
            let paused: Vec<&Part> = history
                .iter()
                .rev()
                .find(|m| m.role == Role::Model)
                .map(|m| m.content.iter().filter(|p| p.as_tool_request().is_some()).collect())
                .unwrap_or_default();
            for (part, tweak) in paused.into_iter().zip(tweaks.iter().cycle()) {
                let built = match tweak {
                    Derive::Restart(data) => part.restart(data.as_ref().map(FValue::to_json)),
                    Derive::RestartWithInput(input, data) => {
                        part.restart_with_input(input.to_json(), data.as_ref().map(FValue::to_json))
                    }
                    Derive::Respond(output) => part.respond(output.to_json()),
                    Derive::Approve(b) => part.restart(Some(FValue::Approved(*b).to_json())),
                };
                match built {
                    Ok(p) if p.as_tool_response().is_some() => respond.push(p),
                    Ok(p) => parts.push(p),
                    Err(_) => {}
                }
            }
        }
        let mut resume = Resume::from_parts(parts);
        resume.respond.extend(respond);
        resume
    }
}
