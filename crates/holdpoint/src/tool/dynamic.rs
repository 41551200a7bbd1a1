//! `DynamicTool`: a tool whose schemas are JSON values known at run time.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;

use super::context::{ToolCall, ToolContext, ToolError};
use super::schema::SchemaValidator;
use super::{Tool, ToolOutcome};
use crate::error::{Error, Result};
use crate::model::ToolDefinition;
use crate::review::HoldView;

type DynFn = dyn Fn(ToolContext, Value) -> BoxFuture<'static, std::result::Result<Value, ToolError>> + Send + Sync;

/// A tool over plain JSON, for schemas that come from configuration or
/// another system rather than from a Rust type.
///
/// ```
/// use holdpoint::tool::DynamicTool;
/// use holdpoint::Tool;
/// let echo = DynamicTool::new("echo", "Echoes its input", serde_json::json!({"type": "object"}), |_ctx, input| async move {
///     Ok(input)
/// });
/// assert_eq!(echo.name(), "echo");
/// ```
#[derive(Clone)]
pub struct DynamicTool {
    definition: ToolDefinition,
    input: SchemaValidator,
    output: Option<SchemaValidator>,
    f: Arc<DynFn>,
    view: Option<Arc<HoldView>>,
}

impl DynamicTool {
    /// A tool with the given input schema and function.
    pub fn new<F, Fut>(name: impl Into<String>, description: impl Into<String>, input_schema: Value, f: F) -> Self
    where
        F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Value, ToolError>> + Send + 'static,
    {
        DynamicTool {
            definition: ToolDefinition {
                name: name.into(),
                description: description.into(),
                input_schema: Some(input_schema.clone()),
                output_schema: None,
                metadata: None,
            },
            input: SchemaValidator::new(input_schema),
            output: None,
            f: Arc::new(move |ctx, v| Box::pin(f(ctx, v))),
            view: None,
        }
    }

    /// Sets the output schema (checked for respond directives).
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.definition.output_schema = Some(schema.clone());
        self.output = Some(SchemaValidator::new(schema));
        self
    }

    /// Shows its held calls through `view` (redaction, preview), as
    /// [`ResumableTool::hold_view`](super::ResumableTool::hold_view).
    pub fn hold_view(mut self, view: HoldView) -> Self {
        self.view = Some(Arc::new(view));
        self
    }

    /// Shares this tool as a trait object.
    pub fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

#[async_trait]
impl Tool for DynamicTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        let name = &self.definition.name;
        if let Err(e) = self.input.check("input", &call.input) {
            return Ok(ToolOutcome::Failed(format!("tool \"{name}\": {e}")));
        }
        let context = call.context.clone();
        match (self.f)(call.context, call.input).await {
            Ok(output) => Ok(ToolOutcome::Output {
                output,
                content: context.take_attached(),
            }),
            Err(ToolError::Interrupt(data)) => Ok(ToolOutcome::Interrupt(data)),
            Err(ToolError::Fail(msg)) => Ok(ToolOutcome::Failed(msg)),
            Err(ToolError::Error(message)) => Err(Error::ToolFailed {
                tool: name.clone(),
                message,
            }),
        }
    }

    fn check_output(&self, output: &Value) -> Result<()> {
        match &self.output {
            Some(v) => v.check(&format!("output for tool \"{}\"", self.definition.name), output),
            None => Ok(()),
        }
    }

    fn hold_view(&self) -> Option<&HoldView> {
        self.view.as_deref()
    }
}
