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

mod convert;
mod held;
mod stateless;

use std::sync::Arc;

use async_trait::async_trait;
use holdpoint::model::ToolDefinition;
use holdpoint::tool::{Tool, ToolCall, ToolOutcome};
use holdpoint::{Error, Result};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::answer::{self, Answers, ELICITATION, INPUT_REQUIRED};
use crate::client::{ListedTool, McpServer, Shared};

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

impl McpServer {
    /// The server's tools as Holdpoint tools, named by the server's
    /// `tool_names` template, as the server last listed them.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .listed_tools()
            .iter()
            .map(|t| Arc::new(McpTool::new(Arc::clone(&self.shared), t)) as Arc<dyn Tool>)
            .collect()
    }
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
