//! Middleware: hooks around each generate iteration, each model call and
//! each tool call (docs/reference.md §10).
//!
//! An iteration hook sees one round of the loop — a model call and the
//! tool calls it asks for — and what came of it ([`IterationReport`]); it
//! may stop the generation by returning an error instead of calling
//! `next.run()`.
//!
//! A tool hook may run the call (`next.run(call)`), answer it itself, hold
//! it (return [`ToolOutcome::Interrupt`]; recorded as `interruptedBy` with
//! the stage's label) or fail it softly ([`ToolOutcome::Failed`]). On a
//! restart, the resume data reaches only the stage that raised the hold;
//! stages outside it see the call as [`ToolHookCall::released`] unless the
//! input was replaced.

mod approval;
mod budget;
mod chain;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use approval::{ApprovalHold, DENIED, TOOL_APPROVAL, ToolApproval, Verdict};
pub use budget::{BUDGET, BUDGET_STOPPED, Budget, BudgetAmount, BudgetHold, Measure, Scope, Spend, USAGE};
pub(crate) use chain::IterationFn;
pub(crate) use chain::{Chain, HeldBy, RestartPlan};
pub use chain::{IterationNext, ModelNext, ToolNext};

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

/// One iteration of the generate loop, as an iteration hook sees it
/// before it runs.
#[derive(Debug, Clone)]
pub struct IterationInfo {
    /// How many tool rounds ran before this iteration in this generation
    /// (0 for the first model call).
    pub round: u32,
    /// The request context (principal, …).
    pub context: Arc<Map<String, Value>>,
}

/// How an iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterationOutcome {
    /// The model called tools, they answered, and the loop goes on.
    Continue,
    /// The model answered without calling tools: the generation is done.
    Finished,
    /// A tool call paused: the generation ends interrupted.
    Interrupted,
}

/// What one iteration did.
#[derive(Debug, Clone)]
pub struct IterationReport {
    /// The model's message of this iteration (with its tool requests).
    pub message: Option<Message>,
    /// How it ended.
    pub outcome: IterationOutcome,
}

/// A hook around generate iterations, model calls and tool calls. Every
/// method has a pass-through default, so a middleware implements only what
/// it needs.
#[async_trait]
pub trait Middleware: Send + Sync {
    /// The middleware's name, recorded as `interruptedBy` on its holds.
    fn name(&self) -> &str;

    /// Wraps each iteration of the generate loop (one model call and the
    /// tool calls it asks for). Return an error instead of calling
    /// `next.run()` to stop the generation with it.
    async fn iteration(&self, info: IterationInfo, next: IterationNext<'_>) -> Result<IterationReport> {
        let _ = info;
        next.run().await
    }

    /// Wraps each model call.
    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> Result<GenerateResponse> {
        next.run(request).await
    }

    /// Wraps each tool call.
    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        next.run(call).await
    }
}
