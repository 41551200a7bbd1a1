//! ChatML prompts (SmolLM2-Instruct's chat template) and reading the
//! model's replies back.
//!
//! A prompt is a list of [`Segment`]s: the template's special tokens
//! (`<|im_start|>`, `<|im_end|>`) apart from the text between them, so
//! the text is tokenized without special-token parsing and a message that
//! happens to contain `<|im_end|>` cannot end its turn early.
//!
//! ```text
//! <|im_start|>system
//! You are a helpful banking assistant. …<|im_end|>
//! <|im_start|>user
//! Transfer $500 to my savings account.<|im_end|>
//! <|im_start|>assistant
//! ```
//!
//! When tools are offered, the system turn also lists them and explains
//! the reply format: one JSON object, `{"tool": …, "arguments": …}` or
//! `{"answer": …}` (the grammar in [`crate::grammar`] enforces it). Past
//! tool calls are shown in that same format in the model's turns; tool
//! results are `tool` turns of text.

use holdpoint::model::ToolDefinition;
use holdpoint::{GenerateRequest, Message, Part, PartKind, Role};
use serde_json::{Map, Value, json};

use crate::grammar::{ANSWER_KEY, ARGUMENTS_KEY, TOOL_KEY};
use crate::schema::tool_input;

/// The start of a turn.
pub const IM_START: &str = "<|im_start|>";
/// The end of a turn.
pub const IM_END: &str = "<|im_end|>";

/// SmolLM2-Instruct's own default system prompt.
pub const DEFAULT_SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// A piece of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A special token of the template.
    Special(&'static str),
    /// Plain text.
    Text(String),
}

/// A rendered prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The segments, in order.
    pub segments: Vec<Segment>,
}

impl Prompt {
    fn turn(&mut self, role: &str, text: &str) {
        self.segments.push(Segment::Special(IM_START));
        self.segments.push(Segment::Text(format!("{role}\n{text}")));
        self.segments.push(Segment::Special(IM_END));
        self.segments.push(Segment::Text("\n".to_owned()));
    }

    /// The whole prompt as one string (special tokens written out).
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Special(t) => *t,
                Segment::Text(t) => t.as_str(),
            })
            .collect()
    }
}

/// Renders `request` as ChatML, ending with an open assistant turn.
/// `tools` are the tools listed in the system turn (none when the
/// request's tool choice is `none`); `json_output` adds an instruction to
/// reply with JSON.
pub fn render(request: &GenerateRequest, tools: &[ToolDefinition], json_output: bool) -> Prompt {
    let mut system = system_text(&request.messages).unwrap_or_else(|| DEFAULT_SYSTEM.to_owned());
    if !tools.is_empty() {
        system.push_str("\n\n");
        system.push_str(&tool_instructions(tools));
    } else if json_output {
        system.push_str("\n\nReply with JSON only.");
    }
    let mut prompt = Prompt::default();
    prompt.turn("system", &system);
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        let (role, text) = match message.role {
            Role::Model => ("assistant", model_text(message)),
            Role::Tool => ("tool", tool_text(message)),
            Role::User | Role::System => ("user", user_text(message)),
        };
        if !text.is_empty() {
            prompt.turn(role, &text);
        }
    }
    prompt.segments.push(Segment::Special(IM_START));
    prompt.segments.push(Segment::Text("assistant\n".to_owned()));
    prompt
}

/// The tool list and the reply format, for the system turn.
fn tool_instructions(tools: &[ToolDefinition]) -> String {
    let mut out = String::from("You can use these tools:\n");
    for tool in tools {
        out.push_str(&format!("- {}: {}", tool.name, tool.description.trim()));
        let schema = tool_input(tool.input_schema.as_ref());
        let args = arguments_summary(&schema);
        if !args.is_empty() {
            out.push_str(&format!(" Arguments: {args}."));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\nReply with one JSON object and nothing else: \
         {{\"{TOOL_KEY}\": \"<tool name>\", \"{ARGUMENTS_KEY}\": {{<arguments>}}}} to call a tool, or \
         {{\"{ANSWER_KEY}\": \"<your reply>\"}} to reply to the user without a tool."
    ));
    out
}

/// `amount (number, required): Amount in dollars.; toAccount (string, …)`.
fn arguments_summary(schema: &Value) -> String {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return String::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(name, prop)| {
            let kind = match prop.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
                _ if prop.get("enum").is_some() => "one of the listed values".to_owned(),
                _ => "any".to_owned(),
            };
            let kind = match prop.get("enum").and_then(Value::as_array) {
                Some(values) => format!(
                    "{kind}: {}",
                    values.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")
                ),
                None => kind,
            };
            let need = if required.contains(&name.as_str()) {
                "required"
            } else {
                "optional"
            };
            match prop.get("description").and_then(Value::as_str) {
                Some(d) if !d.trim().is_empty() => format!("{name} ({kind}, {need}): {}", d.trim()),
                _ => format!("{name} ({kind}, {need})"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A user turn: text, data as JSON, media as a placeholder.
fn user_text(message: &Message) -> String {
    join(message.content.iter().filter_map(|p| match &p.kind {
        PartKind::Text(t) => Some(t.clone()),
        PartKind::Data(v) => Some(data_text(v)),
        PartKind::Media(m) => Some(format!(
            "[{} attachment not shown]",
            m.content_type.as_deref().unwrap_or("media")
        )),
        PartKind::Resource(r) => Some(format!("[resource {}]", r.uri)),
        PartKind::ToolResponse(_) => Some(tool_part_text(p)),
        _ => None,
    }))
}

/// A model turn: its text, and its tool calls in the reply format.
fn model_text(message: &Message) -> String {
    join(message.content.iter().filter_map(|p| match &p.kind {
        PartKind::Text(t) => Some(t.clone()),
        PartKind::Data(v) => Some(data_text(v)),
        PartKind::ToolRequest(r) => Some(call_json(&r.name, r.input.as_ref())),
        _ => None,
    }))
}

/// A tool turn: each result as text.
fn tool_text(message: &Message) -> String {
    join(message.content.iter().filter_map(|p| match &p.kind {
        PartKind::ToolResponse(_) => Some(tool_part_text(p)),
        PartKind::Text(t) => Some(t.clone()),
        PartKind::Data(v) => Some(data_text(v)),
        _ => None,
    }))
}

fn tool_part_text(part: &Part) -> String {
    let Some(r) = part.as_tool_response() else {
        return String::new();
    };
    match soft_failure(r.output.as_ref()) {
        Some(error) => format!("{} failed: {error}", r.name),
        None => format!("{} returned: {}", r.name, output_text(r.output.as_ref())),
    }
}

fn join(texts: impl Iterator<Item = String>) -> String {
    texts.filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
}

/// The text of every `system` message, joined by blank lines (`None` when
/// there is none).
fn system_text(messages: &[Message]) -> Option<String> {
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// Data-part content as text: its JSON.
fn data_text(value: &Value) -> String {
    value.to_string()
}

/// A tool output as text: strings as they are, anything else as JSON.
fn output_text(output: Option<&Value>) -> String {
    match output {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The message of a soft failure: an output that is exactly
/// `{"error": "…"}`, as Holdpoint's generate loop writes it.
fn soft_failure(output: Option<&Value>) -> Option<&str> {
    let obj = output?.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get("error")?.as_str()
}

/// `{"tool": NAME, "arguments": INPUT}` as the grammar writes it.
pub fn call_json(name: &str, input: Option<&Value>) -> String {
    let args = input.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    spaced(&json!({ TOOL_KEY: name, ARGUMENTS_KEY: args }))
}

/// JSON with `": "` and `", "` separators, the grammar's layout.
fn spaced(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(spaced).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// What a grammar-constrained reply said.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A tool call.
    Call {
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
    },
    /// A text answer.
    Answer(String),
}

/// Reads a complete reply in the tool format; `None` when it is not one
/// (a reply cut short by the token limit).
pub fn parse_reply(text: &str) -> Option<Reply> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    let obj = value.as_object()?;
    if let Some(name) = obj.get(TOOL_KEY).and_then(Value::as_str) {
        let input = obj
            .get(ARGUMENTS_KEY)
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        return Some(Reply::Call {
            name: name.to_owned(),
            input,
        });
    }
    obj.get(ANSWER_KEY)
        .and_then(Value::as_str)
        .map(|a| Reply::Answer(a.to_owned()))
}

/// The text of an `{"answer": "…` reply so far (unescaped, without an
/// escape sequence still being written); `None` while the reply is not
/// (yet) an answer.
pub fn partial_answer(text: &str) -> Option<String> {
    let prefix = format!("{{\"{ANSWER_KEY}\": \"");
    let rest = text.strip_prefix(&prefix)?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => {
                let Some(e) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => match read_unicode_escape(&mut chars) {
                        Some(ch) => out.push(ch),
                        // Not all written yet: shown once it is.
                        None => break,
                    },
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The character of a `\uXXXX` escape (the `\u` already read), joining
/// a surrogate pair; `None` when the escape is not complete yet. A lone
/// or broken surrogate is U+FFFD.
fn read_unicode_escape(chars: &mut std::str::Chars<'_>) -> Option<char> {
    fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
        let hex: String = chars.by_ref().take(4).collect();
        if hex.len() < 4 {
            return None;
        }
        Some(u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD))
    }
    let first = hex4(chars)?;
    if !(0xD800..0xDC00).contains(&first) {
        return Some(char::from_u32(first).unwrap_or('\u{FFFD}'));
    }
    let rest = chars.as_str();
    if rest.len() < 6 && (rest.starts_with("\\u") || "\\u".starts_with(rest)) {
        return None;
    }
    if !rest.starts_with("\\u") {
        return Some('\u{FFFD}');
    }
    chars.nth(1);
    let second = hex4(chars)?;
    if !(0xDC00..0xE000).contains(&second) {
        return Some('\u{FFFD}');
    }
    char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)).or(Some('\u{FFFD}'))
}

#[cfg(test)]
mod tests;
