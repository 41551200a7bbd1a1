//! Middleware: hooks around each model call and each tool call (SPEC §6).
//!
//! A tool hook may run the call (`next.run(call)`), answer it itself, hold
//! it (return [`ToolOutcome::Interrupt`]; recorded as `interruptedBy` with
//! the stage's label) or fail it softly ([`ToolOutcome::Failed`]). On a
//! restart, the resume data reaches only the stage that raised the hold;
//! stages outside it see the call as [`ToolHookCall::released`] unless the
//! input was replaced.

mod approval;
mod chain;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use approval::{ApprovalHold, DENIED, TOOL_APPROVAL, ToolApproval, Verdict};
pub(crate) use chain::{Chain, HeldBy, RestartPlan};
pub use chain::{ModelNext, ToolNext};

use crate::error::Result;
use crate::message::Message;
use crate::model::{GenerateRequest, GenerateResponse};
use crate::tool::ToolOutcome;

/// A tool call as a middleware stage sees it.
#[derive(Debug, Clone)]
pub struct ToolHookCall {
    /// The tool's name.
    pub name: String,
    /// The request's ref.
    pub reference: Option<String>,
    /// The arguments.
    pub input: Value,
    /// Resume data, when this stage raised the hold being restarted.
    pub resumed: Option<Map<String, Value>>,
    /// On a restart with new input: the original input.
    pub original_input: Option<Value>,
    /// True when this call restarts a hold raised further in, and this stage
    /// let the same input through before: do not hold it again.
    pub released: bool,
    /// The request context (principal, …).
    pub context: Arc<Map<String, Value>>,
    /// On a restart of this stage's hold: the interrupt data it raised.
    pub interrupt: Option<Map<String, Value>>,
    /// The conversation so far in this generation (the model message that
    /// asked for this call is last).
    pub history: Arc<Vec<Message>>,
}

/// A hook around model and tool calls. Every method has a pass-through
/// default, so a middleware implements only what it needs.
#[async_trait]
pub trait Middleware: Send + Sync {
    /// The middleware's name, recorded as `interruptedBy` on its holds.
    fn name(&self) -> &str;

    /// Wraps each model call.
    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> Result<GenerateResponse> {
        next.run(request).await
    }

    /// Wraps each tool call.
    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        next.run(call).await
    }
}
