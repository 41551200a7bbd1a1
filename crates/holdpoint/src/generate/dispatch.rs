//! Running the tool calls of one model message concurrently and turning
//! their outcomes into parts, in request order.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::future::try_join_all;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::message::{Message, Part, PartKind, metadata};
use crate::middleware::{Chain, HeldBy, RestartPlan, ToolHookCall};
use crate::model::{ChunkSink, ToolDefinition};
use crate::tool::{Tool, ToolContext, ToolOutcome};

/// The tools of a generation by name, and their definitions as the model
/// sees them (sorted by name). Built once — per agent for prompt agents —
/// and shared, so a model call never copies the tools' schemas.
pub(crate) struct Toolset {
    pub by_name: HashMap<String, Arc<dyn Tool>>,
    pub definitions: Arc<[ToolDefinition]>,
}

impl Toolset {
    /// The set of `tools`; a later tool replaces an earlier one of the same name.
    pub fn new(tools: &[Arc<dyn Tool>]) -> Self {
        let by_name: HashMap<String, Arc<dyn Tool>> =
            tools.iter().map(|t| (t.name().to_owned(), Arc::clone(t))).collect();
        let mut definitions: Vec<ToolDefinition> = by_name.values().map(|t| t.definition().clone()).collect();
        definitions.sort_by(|a, b| a.name.cmp(&b.name));
        Toolset {
            by_name,
            definitions: definitions.into(),
        }
    }
}

/// What every tool call of one generation shares.
pub(crate) struct Dispatcher {
    pub tools: Arc<Toolset>,
    pub chain: Chain,
    pub sink: ChunkSink,
    pub context: Arc<Map<String, Value>>,
    /// Issues approval receipts for the calls that run after a hold.
    pub receipts: Option<Arc<crate::receipt::TurnReceipts>>,
}

/// One call to make.
pub(crate) struct PlannedCall {
    pub name: String,
    pub reference: Option<String>,
    pub input: Value,
    pub plan: RestartPlan,
}

/// One call's result.
pub(crate) struct CallResult {
    pub outcome: ToolOutcome,
    pub held_by: Option<HeldBy>,
}

impl Dispatcher {
    pub fn tool(&self, name: &str) -> Result<&Arc<dyn Tool>> {
        self.tools
            .by_name
            .get(name)
            .ok_or_else(|| Error::ToolNotFound(name.to_owned()))
    }

    /// Runs all calls concurrently; results come back in the calls' order.
    ///
    /// Every named tool must exist before any call starts, so a missing
    /// tool fails the round without a sibling's side effects. `history` is
    /// what the calls' middleware sees (shared, not copied per call).
    pub async fn run_all(
        &self,
        calls: Vec<PlannedCall>,
        index: u32,
        history: Arc<Vec<Message>>,
    ) -> Result<Vec<CallResult>> {
        for call in &calls {
            self.tool(&call.name)?;
        }
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        try_join_all(calls.into_iter().map(|c| self.run_one(c, index, Arc::clone(&history)))).await
    }

    async fn run_one(&self, call: PlannedCall, index: u32, history: Arc<Vec<Message>>) -> Result<CallResult> {
        let tool = self.tool(&call.name)?;
        // `outcome` (ok, failed, interrupted) and `held_by` are recorded when
        // the call ends, so a trace tells a held call from one that ran.
        let span = tracing::debug_span!(
            "tool_call",
            tool = %call.name,
            r#ref = call.reference.as_deref().unwrap_or(""),
            outcome = tracing::field::Empty,
            held_by = tracing::field::Empty,
        );
        let ctx = ToolContext {
            name: call.name.clone(),
            reference: call.reference.clone(),
            resumed: None,
            original_input: None,
            answered: None,
            chunks: self.sink.clone(),
            index,
            request: Arc::clone(&self.context),
            attached: Arc::default(),
            receipt: None,
        };
        // The input a preview sees, kept only for a tool that has one.
        let view = tool.hold_view();
        let preview_input = view
            .and_then(crate::review::HoldView::preview_fn)
            .map(|_| call.input.clone());
        let hook_call = ToolHookCall {
            name: call.name,
            reference: call.reference,
            input: call.input,
            resumed: None,
            original_input: None,
            released: false,
            context: Arc::clone(&self.context),
            interrupt: None,
            history,
        };
        let mut plan = call.plan;
        plan.receipts.clone_from(&self.receipts);
        let (mut outcome, held_by) = self
            .chain
            .call_tool(tool.as_ref(), hook_call, &plan, &ctx)
            .instrument(span.clone())
            .await?;
        if let ToolOutcome::Interrupt(data) = &mut outcome {
            // What approvers will see of the hold: masks, preview, review limits.
            crate::review::describe_hold(view, preview_input, data).await;
        }
        span.record(
            "outcome",
            match &outcome {
                ToolOutcome::Output { .. } => "ok",
                ToolOutcome::Failed(_) => "failed",
                ToolOutcome::Interrupt(_) => "interrupted",
            },
        );
        let holder = match &held_by {
            Some(HeldBy::Tool) => Some("tool"),
            Some(HeldBy::Stage(label)) => Some(label.as_str()),
            None => None,
        };
        if let Some(holder) = holder {
            span.record("held_by", holder);
        }
        Ok(CallResult { outcome, held_by })
    }
}

/// Runs `calls` with the middleware seeing `history`, lent for the duration
/// without a copy: it moves into an `Arc` and back (copied only when a
/// middleware kept a handle to it).
pub(crate) async fn run_all_lending(
    dispatcher: &Dispatcher,
    calls: Vec<PlannedCall>,
    index: u32,
    history: &mut Vec<Message>,
) -> Result<Vec<CallResult>> {
    let shared = Arc::new(std::mem::take(history));
    let results = dispatcher.run_all(calls, index, Arc::clone(&shared)).await;
    *history = Arc::try_unwrap(shared).unwrap_or_else(|kept| (*kept).clone());
    results
}

/// The value the model sees for a soft failure.
pub(crate) fn failure_output(message: &str) -> Value {
    json!({ "error": message })
}

/// The response part for a finished (successful or softly failed) call.
pub(crate) fn response_part(name: &str, reference: Option<&str>, outcome: &ToolOutcome) -> Option<Part> {
    let (output, content) = match outcome {
        ToolOutcome::Output { output, content } => (output.clone(), content.clone()),
        ToolOutcome::Failed(msg) => (failure_output(msg), Vec::new()),
        ToolOutcome::Interrupt(_) => return None,
    };
    let mut part = Part::tool_response(name, reference.map(str::to_owned), Some(output));
    if let PartKind::ToolResponse(resp) = &mut part.kind
        && !content.is_empty()
    {
        resp.content = Some(content);
    }
    Some(part)
}

/// The output stored as `pendingOutput` for a call that finished beside a
/// paused sibling.
pub(crate) fn pending_value(outcome: &ToolOutcome) -> Option<Value> {
    match outcome {
        ToolOutcome::Output { output, .. } => Some(output.clone()),
        ToolOutcome::Failed(msg) => Some(failure_output(msg)),
        ToolOutcome::Interrupt(_) => None,
    }
}

/// Marks a request part as paused with `data`, held by `held_by`. Owned
/// data moves into the part; borrowed data is copied.
pub(crate) fn mark_interrupt(part: &mut Part, data: Cow<'_, Map<String, Value>>, held_by: Option<&HeldBy>) {
    let mut data = data;
    // The rule and reply of this hold only: a part paused again carries
    // no keys of its earlier hold.
    for (carried, key) in metadata::CARRIED_META {
        match data
            .contains_key(carried)
            .then(|| data.to_mut().remove(carried))
            .flatten()
        {
            Some(value) => part.set_meta(key, value),
            None => {
                part.remove_meta(key);
            }
        }
    }
    let value = if data.is_empty() {
        Value::Bool(true)
    } else {
        Value::Object(data.into_owned())
    };
    part.set_meta(metadata::INTERRUPT, value);
    match held_by {
        Some(HeldBy::Stage(label)) => part.set_meta(metadata::INTERRUPTED_BY, Value::String(label.clone())),
        _ => {
            part.remove_meta(metadata::INTERRUPTED_BY);
        }
    }
}
