//! `McpTool`: one MCP tool as a Holdpoint tool (docs/reference.md §17.2,
//! §17.4).
//!
//! A first call validates the arguments against the tool's current
//! `inputSchema` and sends `tools/call`. While the call is open the server
//! may ask a question (`elicitation/create`): the call is then *held* — it
//! stays open in the server's `held` registry under a fresh id, and the
//! tool returns an interrupt naming that id. The resume that answers it
//! finds the id again in [`ToolContext::answered_interrupt`], sends the
//! answer on the still-open request and waits for the result. A resume
//! that finds no such call (the process restarted, the server went away)
//! never sends the call again: the model is told its outcome is unknown.
//! A stateless `input_required` result is an interrupt too; its resume
//! sends `tools/call` again with the answers and the echoed `requestState`,
//! so it needs nothing of this process.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use holdpoint::message::{Media, Part, PartKind, Resource};
use holdpoint::model::ToolDefinition;
use holdpoint::tool::{Tool, ToolCall, ToolOutcome};
use holdpoint::{Error, Result};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::answer::{self, Answer, Answers, ELICITATION, INPUT_REQUIRED, MCP_KEY};
use crate::client::{Held, ListedTool, LiveCall, Question, Reply, Shared};

/// One tool of an [`McpServer`](crate::McpServer).
pub struct McpTool {
    shared: Arc<Shared>,
    mcp_name: String,
    definition: ToolDefinition,
}

/// The `metadata` key of a definition that describes the MCP tool behind it.
pub const METADATA_KEY: &str = "mcp";

/// The `metadata.mcp` object of a definition made by this crate.
pub fn mcp_metadata(definition: &ToolDefinition) -> Option<&Map<String, Value>> {
    definition.metadata.as_ref()?.get(METADATA_KEY)?.as_object()
}

/// One boolean annotation (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`) of an MCP tool's definition, when the
/// server gave it.
pub fn hint(definition: &ToolDefinition, name: &str) -> Option<bool> {
    mcp_metadata(definition)?.get("annotations")?.get(name)?.as_bool()
}

/// Whether the server says the tool changes nothing (`readOnlyHint: true`).
pub fn is_read_only(definition: &ToolDefinition) -> bool {
    hint(definition, "readOnlyHint") == Some(true)
}

/// Whether the tool may destroy something, by the protocol's defaults: not
/// read-only, and `destructiveHint` not `false` (it defaults to `true`).
/// Tools that are not MCP tools count as destructive.
pub fn may_destroy(definition: &ToolDefinition) -> bool {
    !is_read_only(definition) && hint(definition, "destructiveHint") != Some(false)
}

impl McpTool {
    pub(crate) fn new(shared: Arc<Shared>, listed: &ListedTool) -> Self {
        let raw = &listed.raw;
        let mcp_name = listed.name().to_owned();
        let description = raw
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| raw.get("title").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let mut meta = Map::new();
        meta.insert("server".into(), Value::String(shared.config.name.clone()));
        meta.insert("tool".into(), Value::String(mcp_name.clone()));
        if let Some(title) = raw.get("title").filter(|t| t.is_string()) {
            meta.insert("title".into(), title.clone());
        }
        meta.insert(
            "annotations".into(),
            raw.get("annotations")
                .filter(|a| a.is_object())
                .cloned()
                .unwrap_or_else(|| json!({})),
        );
        let mut metadata = Map::new();
        metadata.insert(METADATA_KEY.into(), Value::Object(meta));
        let definition = ToolDefinition {
            name: shared.config.tool_name(&mcp_name),
            description,
            input_schema: Some(listed.input.schema().clone()),
            output_schema: listed.output.as_ref().map(|o| o.schema().clone()),
            metadata: Some(metadata),
        };
        McpTool {
            shared,
            mcp_name,
            definition,
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.shared.config.name
    }

    /// The tool's name on the server.
    pub fn mcp_name(&self) -> &str {
        &self.mcp_name
    }

    fn fail(&self, message: impl std::fmt::Display) -> ToolOutcome {
        ToolOutcome::Failed(format!("tool \"{}\": {message}", self.definition.name))
    }

    /// A first call, or a stateless retry with answers.
    async fn send(&self, input: Value, retry: Option<(Value, Option<String>)>) -> ToolOutcome {
        let Some(listed) = self.shared.tool(&self.mcp_name) else {
            return self.fail(format!(
                "MCP server \"{}\" no longer offers tool \"{}\"",
                self.server(),
                self.mcp_name
            ));
        };
        let arguments = match input {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => return self.fail(format!("the input must be an object, got {other}")),
        };
        let value = Value::Object(arguments);
        if let Err(e) = listed.input.check("input", &value) {
            return self.fail(e);
        }
        let Value::Object(arguments) = value else {
            return self.fail("the input must be an object");
        };
        match self.shared.start_call(&self.mcp_name, arguments, retry).await {
            Ok(call) => self.drive(call).await,
            Err(e) => self.fail(e),
        }
    }

    /// Waits for the open call's result, or holds it on the server's
    /// question. The call timeout counts from now.
    async fn drive(&self, mut call: LiveCall) -> ToolOutcome {
        enum Next {
            Done(std::result::Result<std::result::Result<Reply, String>, ()>),
            Asked(Question),
            TimedOut,
        }
        let limit = self.shared.config.call_timeout();
        let next = tokio::select! {
            r = &mut call.done => Next::Done(r.map_err(|_| ())),
            Some(q) = call.questions.recv() => Next::Asked(q),
            _ = tokio::time::sleep(limit) => Next::TimedOut,
        };
        match next {
            Next::Done(Ok(Ok(Reply::Complete(result)))) => {
                self.shared.call_succeeded();
                convert(&self.definition.name, &result)
            }
            Next::Done(Ok(Ok(Reply::InputRequired(result)))) => {
                self.shared.call_succeeded();
                self.input_required(&result)
            }
            Next::Done(Ok(Err(message))) => self.fail(message),
            Next::Done(Err(())) => self.fail("the call ended without an answer"),
            Next::TimedOut => {
                drop(call);
                self.fail(format!("no answer within {limit:?}; the call was cancelled"))
            }
            Next::Asked(q) => self.hold(call, q),
        }
    }

    /// Holds `call` on the question `q`: registers it and returns the
    /// interrupt.
    fn hold(&self, call: LiveCall, q: Question) -> ToolOutcome {
        let p = &q.params;
        let mode = p.get("mode").and_then(Value::as_str).unwrap_or("form").to_owned();
        let message = p.get("message").cloned().unwrap_or(Value::String(String::new()));
        let id = uuid::Uuid::new_v4().to_string();
        let mut mcp = Map::new();
        mcp.insert("type".into(), Value::String(ELICITATION.into()));
        mcp.insert("server".into(), Value::String(self.server().to_owned()));
        mcp.insert("tool".into(), Value::String(self.mcp_name.clone()));
        mcp.insert("mode".into(), Value::String(mode.clone()));
        mcp.insert("liveCall".into(), Value::String(id.clone()));
        if mode == "url" {
            for key in ["url", "elicitationId"] {
                if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
                    mcp.insert(key.into(), v.clone());
                }
            }
        } else {
            mcp.insert(
                "requestedSchema".into(),
                p.get("requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
        }
        let mut data = Map::new();
        data.insert("message".into(), message);
        data.insert(MCP_KEY.into(), Value::Object(mcp));
        self.shared.sweep_held();
        self.shared.held().insert(
            id,
            Held {
                call,
                reply: q.reply,
                data: data.clone(),
                since: Instant::now(),
            },
        );
        ToolOutcome::Interrupt(data)
    }

    /// Answers a held call's question and goes on waiting for its result.
    async fn answer_live(&self, part: &Map<String, Value>, resumed: &Map<String, Value>) -> Result<ToolOutcome> {
        let Some(id) = part.get("liveCall").and_then(Value::as_str) else {
            return Ok(self.fail("the hold names no live call"));
        };
        let answer = match Answers::parse(resumed).map_err(Error::InvalidArgument)? {
            Answers::One(a) => a,
            Answers::ByKey(_) => {
                return Err(Error::InvalidArgument(
                    "a server's question during a call takes one answer (`action`), not `responses`".into(),
                ));
            }
        };
        let Some(mut held) = self.shared.held().remove(id) else {
            return Ok(self.fail(format!(
                "the call held on MCP server \"{}\"'s question is no longer open (the process restarted, \
                 the server went away, or the question expired); its outcome is unknown and it was not run again",
                self.server()
            )));
        };
        if held.call.tool != self.mcp_name {
            return Ok(self.fail("the hold belongs to another tool"));
        }
        let mcp = held
            .data
            .get(MCP_KEY)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let problem = if mcp.get("mode").and_then(Value::as_str) == Some("url") {
            matches!(&answer, Answer::Accept(Some(_)))
                .then(|| "a URL-mode question is answered on the server's page; accept carries no content".to_owned())
        } else {
            let schema = mcp
                .get("requestedSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            answer::check_content(&schema, &answer).err()
        };
        if let Some(problem) = problem {
            // The question stays open and is asked again with the reason.
            held.data.insert("error".into(), Value::String(problem));
            let data = held.data.clone();
            self.shared.held().insert(id.to_owned(), held);
            return Ok(ToolOutcome::Interrupt(data));
        }
        if held.reply.send(answer.to_result()).is_err() {
            return Ok(self.fail(format!(
                "MCP server \"{}\"'s question expired before the answer (the server was told cancel); the answer was not sent",
                self.server()
            )));
        }
        let Held { call, .. } = held;
        Ok(self.drive(call).await)
    }

    /// The interrupt of a stateless `input_required` result.
    fn input_required(&self, result: &Value) -> ToolOutcome {
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if requests.is_empty() {
            return self.fail("the server asked for input without saying which");
        }
        let mut messages = Vec::new();
        for (key, req) in &requests {
            if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
                let method = req.get("method").and_then(Value::as_str).unwrap_or("?");
                return self.fail(format!(
                    "the server asked for `{method}` (input request \"{key}\"), which Holdpoint does not provide"
                ));
            }
            if let Some(m) = req.pointer("/params/message").and_then(Value::as_str) {
                messages.push(m.to_owned());
            }
        }
        let mut mcp = Map::new();
        mcp.insert("type".into(), Value::String(INPUT_REQUIRED.into()));
        mcp.insert("server".into(), Value::String(self.server().to_owned()));
        mcp.insert("tool".into(), Value::String(self.mcp_name.clone()));
        mcp.insert("inputRequests".into(), Value::Object(requests));
        if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
            mcp.insert("requestState".into(), state.clone());
        }
        let mut data = Map::new();
        data.insert("message".into(), Value::String(messages.join("\n")));
        data.insert(MCP_KEY.into(), Value::Object(mcp));
        ToolOutcome::Interrupt(data)
    }

    /// Retries a stateless call with the answers; a bad answer asks again.
    async fn answer_stateless(
        &self,
        paused: &Map<String, Value>,
        part: &Map<String, Value>,
        resumed: &Map<String, Value>,
        input: Value,
    ) -> Result<ToolOutcome> {
        let requests = part
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let answers = match Answers::parse(resumed).map_err(Error::InvalidArgument)? {
            Answers::ByKey(m) => m,
            Answers::One(a) if requests.len() == 1 => requests.keys().map(|k| (k.clone(), a.clone())).collect(),
            Answers::One(_) => {
                return Err(Error::InvalidArgument(format!(
                    "the server asked {} questions; answer each under `responses` by key ({})",
                    requests.len(),
                    requests.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        };
        let mut problems = Vec::new();
        let mut responses = Map::new();
        for (key, req) in &requests {
            let Some(answer) = answers.get(key) else {
                problems.push(format!("no answer for \"{key}\""));
                continue;
            };
            let url = req.pointer("/params/mode").and_then(Value::as_str) == Some("url");
            if url {
                if matches!(answer, Answer::Accept(Some(_))) {
                    problems.push(format!("\"{key}\": a URL-mode question's accept carries no content"));
                }
            } else {
                let schema = req
                    .pointer("/params/requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"}));
                if let Err(e) = answer::check_content(&schema, answer) {
                    problems.push(format!("\"{key}\": {e}"));
                }
            }
            responses.insert(key.clone(), answer.to_result());
        }
        if let Some(extra) = answers.keys().find(|k| !requests.contains_key(*k)) {
            problems.push(format!("\"{extra}\" was not asked"));
        }
        if !problems.is_empty() {
            let mut data = paused.clone();
            data.insert("error".into(), Value::String(problems.join("; ")));
            return Ok(ToolOutcome::Interrupt(data));
        }
        let state = part.get("requestState").and_then(Value::as_str).map(str::to_owned);
        Ok(self.send(input, Some((Value::Object(responses), state))).await)
    }
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        // `outcome` is recorded when the call ends (ok, failed, held).
        let span = tracing::info_span!(
            "mcp_call",
            server = %self.server(),
            tool = %self.mcp_name,
            outcome = tracing::field::Empty,
        );
        let outcome = self.run(call).instrument(span.clone()).await;
        let label = match &outcome {
            Ok(ToolOutcome::Output { .. }) => "ok",
            Ok(ToolOutcome::Failed(_)) => "failed",
            Ok(ToolOutcome::Interrupt(_)) => "held",
            Err(_) => "error",
        };
        span.record("outcome", label);
        outcome
    }

    fn check_output(&self, output: &Value) -> Result<()> {
        match self.shared.tool(&self.mcp_name).and_then(|t| t.output) {
            Some(v) => v.check(&format!("output for tool \"{}\"", self.definition.name), output),
            None => Ok(()),
        }
    }

    fn check_resume(&self, resumed: &Map<String, Value>) -> Result<()> {
        Answers::parse(resumed).map(|_| ()).map_err(Error::InvalidArgument)
    }
}

impl McpTool {
    /// A first call, the answer to a live hold, or a stateless retry.
    async fn run(&self, call: ToolCall) -> Result<ToolOutcome> {
        let ctx = call.context;
        if let (Some(paused), Some(resumed)) = (ctx.answered_interrupt(), ctx.resumed()) {
            let paused = Some(paused);
            if let Some(part) = answer::mcp_part(paused, ELICITATION) {
                return self.answer_live(part, resumed).await;
            }
            if let (Some(part), Some(data)) = (answer::mcp_part(paused, INPUT_REQUIRED), paused) {
                return self.answer_stateless(data, part, resumed, call.input).await;
            }
        }
        Ok(self.send(call.input, None).await)
    }
}

/// A `CallToolResult` as an outcome: `structuredContent` (else the text
/// blocks joined by newlines) is the output; images and audio become media
/// parts (data URLs), resource links resource parts, embedded resources
/// and anything else data parts. `isError` is a soft failure with the text.
pub(crate) fn convert(tool: &str, result: &Value) -> ToolOutcome {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut texts = Vec::new();
    let mut parts = Vec::new();
    for b in &blocks {
        let s = |k: &str| b.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => texts.push(s("text").unwrap_or_default().to_owned()),
            Some("image") | Some("audio") => {
                let mime = s("mimeType").unwrap_or("application/octet-stream");
                parts.push(Part::from_kind(PartKind::Media(Media {
                    content_type: Some(mime.to_owned()),
                    url: format!("data:{mime};base64,{}", s("data").unwrap_or_default()),
                })));
            }
            Some("resource_link") => match s("uri") {
                Some(uri) => parts.push(Part::from_kind(PartKind::Resource(Resource { uri: uri.to_owned() }))),
                None => parts.push(Part::data(b.clone())),
            },
            Some("resource") => parts.push(Part::data(b.get("resource").cloned().unwrap_or(Value::Null))),
            _ => parts.push(Part::data(b.clone())),
        }
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = if texts.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            texts.join("\n")
        };
        return ToolOutcome::Failed(format!("tool \"{tool}\": {text}"));
    }
    let output = match result.get("structuredContent").filter(|v| !v.is_null()) {
        Some(v) => v.clone(),
        None if !texts.is_empty() => Value::String(texts.join("\n")),
        None => Value::Null,
    };
    ToolOutcome::Output { output, content: parts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_become_output_and_parts() {
        let r = json!({"content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"},
            {"type": "image", "data": "AAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "test://x", "name": "x"}
        ]});
        let ToolOutcome::Output { output, content } = convert("t", &r) else {
            panic!("not output")
        };
        assert_eq!(output, json!("a\nb"));
        assert_eq!(content.len(), 2);
        assert!(matches!(&content[0].kind, PartKind::Media(m) if m.url == "data:image/png;base64,AAA"));
        assert!(matches!(&content[1].kind, PartKind::Resource(r) if r.uri == "test://x"));
        let s = json!({"content": [{"type": "text", "text": "{}"}], "structuredContent": {"n": 1}});
        assert!(matches!(convert("t", &s), ToolOutcome::Output { output, .. } if output == json!({"n": 1})));
        let e = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        assert_eq!(convert("t", &e), ToolOutcome::Failed("tool \"t\": boom".into()));
    }
}
