//! Running a list of middleware around one model call or one tool call.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use futures::future::BoxFuture;

use super::{IterationInfo, IterationReport, Middleware, ToolHookCall};
use crate::error::{Error, Result};
use crate::model::{ChunkSink, GenerateRequest, GenerateResponse, Model};
use crate::tool::{Tool, ToolCall, ToolContext, ToolOutcome};

type Stage = (String, Arc<dyn Middleware>);

/// Who raised a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeldBy {
    /// The tool itself.
    Tool,
    /// The middleware stage with this label.
    Stage(String),
}

/// Where a restart's resume data goes.
#[derive(Debug, Clone, Default)]
pub(crate) struct RestartPlan {
    /// The stage index that raised the hold; `None` means the tool.
    pub target_stage: Option<usize>,
    pub resumed: Option<Map<String, Value>>,
    pub original_input: Option<Value>,
    pub input_replaced: bool,
    /// The interrupt data of the hold being answered.
    pub interrupt: Option<Map<String, Value>>,
    /// The hold answered was an approval rule's (outermost): its approval
    /// releases the call through the stages inside it too, which never
    /// saw it (the rule's approvers decided it).
    pub released_by_rule: bool,
    /// What the answer decided, for the receipt of the call if it runs.
    pub receipt: Option<crate::receipt::ReceiptBasis>,
    /// The turn's receipt issuer (set for every call of a turn that
    /// issues receipts).
    pub receipts: Option<Arc<crate::receipt::TurnReceipts>>,
}

/// The middleware of one generation, with their labels (`name`, then
/// `name#2`, … when a name repeats).
#[derive(Clone, Default)]
pub(crate) struct Chain {
    stages: Vec<Stage>,
}

impl Chain {
    pub fn new(middleware: &[Arc<dyn Middleware>]) -> Self {
        let mut stages: Vec<Stage> = Vec::with_capacity(middleware.len());
        for mw in middleware {
            let name = mw.name().to_owned();
            let seen = stages
                .iter()
                .filter(|(label, _)| label == &name || label.starts_with(&format!("{name}#")))
                .count();
            let label = if seen == 0 {
                name
            } else {
                format!("{name}#{}", seen + 1)
            };
            stages.push((label, Arc::clone(mw)));
        }
        Chain { stages }
    }

    /// Whether there are no stages.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Runs one loop iteration (`run`) inside every stage's iteration hook.
    pub async fn call_iteration<'a>(&'a self, info: IterationInfo, run: IterationFn<'a>) -> Result<IterationReport> {
        IterationNext {
            rest: &self.stages,
            info: info.clone(),
            run,
        }
        .run()
        .await
    }

    /// The stage index of a hold label, for routing a restart.
    pub fn stage_of(&self, label: &str) -> Result<usize> {
        self.stages.iter().position(|(l, _)| l == label).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the hold was raised by middleware \"{label}\", which this agent does not have"
            ))
        })
    }

    pub async fn call_model(
        &self,
        model: &dyn Model,
        request: GenerateRequest,
        sink: &ChunkSink,
    ) -> Result<GenerateResponse> {
        ModelNext {
            rest: &self.stages,
            model,
            sink,
        }
        .run(request)
        .await
    }

    pub async fn call_tool(
        &self,
        tool: &dyn Tool,
        call: ToolHookCall,
        plan: &RestartPlan,
        context: &ToolContext,
    ) -> Result<(ToolOutcome, Option<HeldBy>)> {
        let holder = Mutex::new(None);
        let outcome = ToolNext {
            rest: &self.stages,
            index: 0,
            tool,
            plan,
            context,
            holder: &holder,
            granted: false,
            grant: None,
            ask_again: false,
        }
        .run(call)
        .await?;
        let held = holder.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok((outcome, held))
    }
}

/// The loop iteration itself, as the innermost step of the chain.
pub(crate) type IterationFn<'a> = Box<dyn FnOnce() -> BoxFuture<'a, Result<IterationReport>> + Send + 'a>;

/// The rest of the chain of a generate iteration.
pub struct IterationNext<'a> {
    rest: &'a [Stage],
    info: IterationInfo,
    run: IterationFn<'a>,
}

impl IterationNext<'_> {
    /// Runs the next stage, or the iteration itself.
    pub async fn run(self) -> Result<IterationReport> {
        match self.rest.split_first() {
            None => (self.run)().await,
            Some(((_, mw), rest)) => {
                let next = IterationNext {
                    rest,
                    info: self.info.clone(),
                    run: self.run,
                };
                mw.iteration(self.info, next).await
            }
        }
    }
}

/// The rest of the chain of a model call.
pub struct ModelNext<'a> {
    rest: &'a [Stage],
    model: &'a dyn Model,
    sink: &'a ChunkSink,
}

impl ModelNext<'_> {
    /// Calls the next stage, or the model itself.
    pub async fn run(self, request: GenerateRequest) -> Result<GenerateResponse> {
        match self.rest.split_first() {
            None => self.model.generate(request, self.sink.clone()).await,
            Some(((_, mw), rest)) => {
                mw.model(
                    request,
                    ModelNext {
                        rest,
                        model: self.model,
                        sink: self.sink,
                    },
                )
                .await
            }
        }
    }
}

/// The rest of the chain of a tool call.
pub struct ToolNext<'a> {
    rest: &'a [Stage],
    index: usize,
    tool: &'a dyn Tool,
    plan: &'a RestartPlan,
    context: &'a ToolContext,
    holder: &'a Mutex<Option<HeldBy>>,
    /// A standing grant let the call through (docs/reference.md §10.9):
    /// the stages inside see it released and do not hold it.
    granted: bool,
    /// The grant that let it through, for its receipt.
    grant: Option<crate::hold::Grant>,
    /// The tool is to ask its own question again: it gets no resume data
    /// even when the restart answers its own interrupt.
    ask_again: bool,
}

impl ToolNext<'_> {
    /// The rest of the chain for a call a standing grant lets through: the
    /// stages inside see it released, as after an approval of the rule's
    /// hold.
    /// `grant` is named in the call's receipt.
    pub(crate) fn granted_by(mut self, grant: &crate::hold::Grant) -> Self {
        self.granted = true;
        self.grant = Some(grant.clone());
        self
    }

    /// The receipt of the call about to run with `input`, when it runs
    /// after an answered hold or by a standing grant.
    fn receipt(&self, input: &Value) -> Option<String> {
        let turn = self.plan.receipts.as_deref()?;
        let context = &self.context.request;
        if self.granted {
            let grant = self.grant.as_ref()?;
            return crate::receipt::for_grant(turn, grant, self.context.name(), input);
        }
        if self.ask_again {
            return None;
        }
        let basis = self.plan.receipt.as_ref()?;
        crate::receipt::for_restart(
            turn,
            basis,
            self.context.name(),
            self.context.reference(),
            input,
            context,
        )
    }

    /// The rest of the chain with the tool asking its own question again:
    /// a restart that answered the tool's interrupt reaches it without
    /// the answer (an approver's edit of a call a rule governs: the answer
    /// was to the old input, so the revised call is asked again and held
    /// for the rule).
    pub(crate) fn asking_again(mut self) -> Self {
        self.ask_again = true;
        self
    }

    fn note_hold(&self, by: HeldBy) {
        let mut h = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        if h.is_none() {
            *h = Some(by);
        }
    }

    /// Calls the next stage, or the tool itself.
    pub async fn run(self, mut call: ToolHookCall) -> Result<ToolOutcome> {
        let is_restart = self.plan.resumed.is_some();
        match self.rest.split_first() {
            None => {
                // The tool sees resume data and the interrupt it answers
                // only for its own hold.
                let own = is_restart && self.plan.target_stage.is_none() && !self.ask_again;
                let (resumed, answered) = if own {
                    (self.plan.resumed.clone(), self.plan.interrupt.clone())
                } else {
                    (None, None)
                };
                let receipt = self.receipt(&call.input);
                let ctx = self
                    .context
                    .clone()
                    .with_resumed(resumed, self.plan.original_input.clone())
                    .with_answered_interrupt(answered)
                    .with_receipt(receipt);
                let outcome = self
                    .tool
                    .call(ToolCall {
                        input: call.input,
                        context: ctx,
                    })
                    .await?;
                if matches!(outcome, ToolOutcome::Interrupt(_)) {
                    self.note_hold(HeldBy::Tool);
                }
                Ok(outcome)
            }
            Some(((label, mw), rest)) => {
                let here = self.index;
                let target_is_inner = match self.plan.target_stage {
                    None => true,
                    Some(t) => t > here,
                };
                let is_target = is_restart && self.plan.target_stage == Some(here);
                call.resumed = if is_target { self.plan.resumed.clone() } else { None };
                call.interrupt = if is_target { self.plan.interrupt.clone() } else { None };
                call.released = self.granted
                    || (is_restart && !self.plan.input_replaced && (target_is_inner || self.plan.released_by_rule));
                call.original_input = self.plan.original_input.clone();
                let next = ToolNext {
                    rest,
                    index: here + 1,
                    tool: self.tool,
                    plan: self.plan,
                    context: self.context,
                    holder: self.holder,
                    granted: self.granted,
                    grant: self.grant.clone(),
                    ask_again: self.ask_again,
                };
                let outcome = mw.tool(call, next).await?;
                if matches!(outcome, ToolOutcome::Interrupt(_)) {
                    self.note_hold(HeldBy::Stage(label.clone()));
                }
                Ok(outcome)
            }
        }
    }
}
