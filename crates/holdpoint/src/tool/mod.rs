//! Tools: the `Tool` trait, typed and resumable tools, the call context and
//! the three non-success outcomes (interrupt, soft failure, hard error).

mod context;
mod dynamic;
mod schema;
mod typed;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use context::{ToolCall, ToolContext, ToolError};
pub use dynamic::DynamicTool;
pub use schema::{SchemaValidator, schema_for};
pub use typed::{Interrupted, ResumableTool, TypedTool, tool};

use crate::error::Result;
use crate::message::Part;
use crate::model::ToolDefinition;

/// What a tool call produced, as the generate loop sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// Success: the output (and any extra parts) becomes a `toolResponse`.
    Output {
        /// The output value.
        output: Value,
        /// Extra parts attached to the response.
        content: Vec<Part>,
    },
    /// The call pauses with this interrupt data.
    Interrupt(Map<String, Value>),
    /// A soft failure: the model is told this error as the tool's result.
    Failed(String),
}

impl ToolOutcome {
    /// A successful outcome with no extra parts.
    pub fn output(output: Value) -> Self {
        ToolOutcome::Output {
            output,
            content: Vec::new(),
        }
    }
}

/// A tool the model can call.
///
/// Most users build tools with [`tool`] or [`ResumableTool::define`]; implement
/// this trait directly for tools whose schema is only known at run time.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and schemas, as sent to the model.
    fn definition(&self) -> &ToolDefinition;

    /// The tool's name.
    fn name(&self) -> &str {
        &self.definition().name
    }

    /// Runs the call. `Err` values are hard errors that fail the generation;
    /// interrupts and soft failures are `Ok` outcomes.
    async fn call(&self, call: ToolCall) -> Result<ToolOutcome>;

    /// Checks an output supplied by a respond directive against the output
    /// schema (no check when the tool has none).
    fn check_output(&self, output: &Value) -> Result<()>;

    /// Checks the resume data of a restart before any call of the resume
    /// runs, so bad data fails the resume without a sibling's side effects.
    /// The default accepts anything.
    fn check_resume(&self, resumed: &Map<String, Value>) -> Result<()> {
        let _ = resumed;
        Ok(())
    }

    /// How this tool's resume data says yes or no, when it asks for
    /// approval itself (see
    /// [`ResumableTool::approval_reply`]). The default: it does not.
    fn approval_reply(&self) -> Option<&crate::hold::ReplyShape> {
        None
    }

    /// How this tool's held calls are shown: input paths to redact and a
    /// preview ([`HoldView`](crate::review::HoldView)). The default:
    /// nothing redacted, no preview.
    fn hold_view(&self) -> Option<&crate::review::HoldView> {
        None
    }
}

/// Anything an agent or a generation takes as a tool: a typed tool
/// ([`tool()`], [`ResumableTool`]), a [`DynamicTool`], your own [`Tool`],
/// or one already shared as `Arc<dyn Tool>`.
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::agent::Agent;
/// use holdpoint::tool::{DynamicTool, Tool, ToolContext, tool};
/// use holdpoint::ScriptedModel;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Account { account: String }
/// let balance = tool("getBalance", "Returns a balance", |_ctx: ToolContext, a: Account| async move {
///     Ok(format!("{}: $1,250.00", a.account))
/// });
/// let echo = DynamicTool::new("echo", "Echoes", serde_json::json!({"type": "object"}), |_ctx, v| async move { Ok(v) });
/// let shared: Arc<dyn Tool> = echo.clone().into_tool();
/// let agent = Agent::builder("a")
///     .model(Arc::new(ScriptedModel::new("m")))
///     .tools([balance])            // typed tools, no `.into_tool()`
///     .tools(vec![shared])         // or trait objects
///     .build()?;
/// # let _ = agent;
/// # Ok::<(), holdpoint::Error>(())
/// ```
pub trait IntoTool {
    /// This tool as a shared trait object.
    fn into_tool(self) -> Arc<dyn Tool>;
}

impl<T: Tool + 'static> IntoTool for T {
    fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl IntoTool for Arc<dyn Tool> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}

impl<T: Tool + 'static> IntoTool for Arc<T> {
    fn into_tool(self) -> Arc<dyn Tool> {
        self
    }
}
