//! `Budget`: counts tokens, tool calls or a caller-supplied cost per turn
//! and per session, and *holds* the turn for approval when a limit is
//! reached instead of failing it (docs/reference.md §10.6).
//!
//! Invariants:
//! - Every count is derived from the conversation itself, so it is as
//!   durable as the session and the same on every replica: tool calls are
//!   the tool requests in the history, tokens are the usage this middleware
//!   stamps on each model message (metadata key [`USAGE`]), a cost is the
//!   caller's function applied to both.
//! - A limit is checked before a tool call runs; the call that would go
//!   over is held with interrupt data `{"message", "budget": {measure, scope,
//!   limit, used}}`, `interruptedBy` = [`BUDGET`].
//! - Approving a hold (restart with `{"toolApproved": true}`) runs the call
//!   and raises that limit once by its step; every approved hold in the
//!   limit's scope counts once. Denying it (`false`, optionally with a
//!   `reason`) stops: the call fails softly with a text starting with
//!   [`BUDGET_STOPPED`], and every later call of the same turn is refused
//!   without asking again.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Middleware, ModelNext, ToolHookCall, ToolNext};
use crate::error::Result;
use crate::message::metadata::{self, TOOL_APPROVED};
use crate::message::{Message, Part, Role, ToolRequest};
use crate::model::{GenerateRequest, GenerateResponse, Usage};
use crate::tool::ToolOutcome;

/// The name `Budget` records as `interruptedBy` on its holds.
pub const BUDGET: &str = "holdpoint/budget";

/// The metadata key of a model message's token usage, as stamped by
/// [`Budget`]: `{"inputTokens", "outputTokens", "totalTokens"}`.
pub const USAGE: &str = "usage";

/// The start of the soft failure a call gets once its budget was not raised.
pub const BUDGET_STOPPED: &str = "the budget was not raised";

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Model tokens (total, or input + output when the provider gives no total).
    Tokens,
    /// Tool calls, the held one included.
    ToolCalls,
    /// The caller's cost function over model calls and tool calls.
    Cost,
}

impl Measure {
    /// The wire name: `tokens`, `toolCalls` or `cost`.
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Tokens => "tokens",
            Measure::ToolCalls => "toolCalls",
            Measure::Cost => "cost",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        [Measure::Tokens, Measure::ToolCalls, Measure::Cost]
            .into_iter()
            .find(|m| m.as_str() == text)
    }

    /// Whether it counts whole things (tokens, tool calls), not a cost.
    pub fn is_count(self) -> bool {
        self != Measure::Cost
    }

    /// `n` of this measure for people: "3 tool calls", "1 tool call",
    /// "1200 tokens", a cost as a number.
    fn amount(self, n: f64) -> String {
        match self {
            Measure::ToolCalls if trim(n) == "1" => "1 tool call".to_owned(),
            Measure::ToolCalls => format!("{} tool calls", trim(n)),
            Measure::Tokens if trim(n) == "1" => "1 token".to_owned(),
            Measure::Tokens => format!("{} tokens", trim(n)),
            Measure::Cost => format!("a cost of {}", trim(n)),
        }
    }

    /// `n` on the wire: an integer for a count.
    fn number(self, n: f64) -> Value {
        if self.is_count() && n.fract() == 0.0 && (0.0..9.0e15).contains(&n) {
            json!(n as u64)
        } else {
            json!(n)
        }
    }
}

/// Where a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Since the last user message.
    Turn,
    /// The whole session.
    Session,
}

impl Scope {
    /// The wire name: `turn` or `session`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Turn => "turn",
            Scope::Session => "session",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        [Scope::Turn, Scope::Session].into_iter().find(|m| m.as_str() == text)
    }
}

/// An amount a limit is raised by: a whole count (`2` tool calls, `50_000`
/// tokens) or a cost (`0.5`). Implemented for the integer types and `f64`.
pub trait BudgetAmount {
    /// The amount as the budget counts it.
    fn amount(self) -> f64;
}

macro_rules! budget_amount {
    ($($t:ty),*) => {$(
        impl BudgetAmount for $t {
            #[allow(clippy::cast_precision_loss, clippy::cast_lossless)]
            fn amount(self) -> f64 {
                self as f64
            }
        }
    )*};
}

budget_amount!(u32, u64, usize, i32, i64, f64);

/// One thing a cost function prices.
#[derive(Debug, Clone, Copy)]
pub enum Spend<'a> {
    /// A model call and its usage.
    Model(&'a Usage),
    /// A tool call (name and input).
    Tool(&'a ToolRequest),
}

type CostFn = Arc<dyn Fn(Spend<'_>) -> f64 + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Limit {
    measure: Measure,
    scope: Scope,
    max: f64,
    step: f64,
}

/// Holds a turn for approval when it reaches a token, tool-call or cost
/// limit (see the module docs for how counts and raises work).
///
/// ```
/// use holdpoint::middleware::{Budget, Spend};
/// let budget = Budget::new()
///     .tool_calls_per_turn(5)
///     .tokens_per_session(100_000)
///     .cost_per_session(2.50, |spend| match spend {
///         Spend::Model(usage) => usage.total_tokens.unwrap_or(0) as f64 * 0.000_002,
///         Spend::Tool(call) if call.name == "search" => 0.01,
///         Spend::Tool(_) => 0.0,
///     });
/// # let _ = budget.into_middleware();
/// ```
#[derive(Clone, Default)]
pub struct Budget {
    limits: Vec<Limit>,
    cost: Option<CostFn>,
}

impl Budget {
    /// A budget with no limits (add them with the builder methods).
    pub fn new() -> Self {
        Self::default()
    }

    fn limit(mut self, measure: Measure, scope: Scope, max: f64) -> Self {
        self.limits.retain(|l| (l.measure, l.scope) != (measure, scope));
        self.limits.push(Limit {
            measure,
            scope,
            max,
            step: max,
        });
        self
    }

    /// At most `max` tokens per turn.
    pub fn tokens_per_turn(self, max: u64) -> Self {
        self.limit(Measure::Tokens, Scope::Turn, max as f64)
    }

    /// At most `max` tokens per session.
    pub fn tokens_per_session(self, max: u64) -> Self {
        self.limit(Measure::Tokens, Scope::Session, max as f64)
    }

    /// At most `max` tool calls per turn.
    pub fn tool_calls_per_turn(self, max: u32) -> Self {
        self.limit(Measure::ToolCalls, Scope::Turn, f64::from(max))
    }

    /// At most `max` tool calls per session.
    pub fn tool_calls_per_session(self, max: u32) -> Self {
        self.limit(Measure::ToolCalls, Scope::Session, f64::from(max))
    }

    /// At most `max` of `cost` per turn. One cost function serves both
    /// scopes; the last one given wins.
    pub fn cost_per_turn(mut self, max: f64, cost: impl Fn(Spend<'_>) -> f64 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(cost));
        self.limit(Measure::Cost, Scope::Turn, max)
    }

    /// At most `max` of `cost` per session.
    pub fn cost_per_session(mut self, max: f64, cost: impl Fn(Spend<'_>) -> f64 + Send + Sync + 'static) -> Self {
        self.cost = Some(Arc::new(cost));
        self.limit(Measure::Cost, Scope::Session, max)
    }

    /// How much one approval raises the last limit added (default: the
    /// limit itself, so each approval allows as much again): a count for
    /// tokens and tool calls (`.tool_calls_per_turn(5).raise_by(2)`), an
    /// amount for a cost (`.raise_by(0.5)`). Negative amounts raise by 0.
    pub fn raise_by(mut self, step: impl BudgetAmount) -> Self {
        if let Some(last) = self.limits.last_mut() {
            last.step = step.amount().max(0.0);
        }
        self
    }

    /// Claims a paused call this middleware held: its limit, what the call
    /// would use, and the directives that answer it. `None` for any other
    /// part (a tool's own interrupt, another middleware's hold, an answered
    /// one).
    ///
    /// ```
    /// use holdpoint::middleware::{Budget, Measure};
    /// use holdpoint::Part;
    /// let mut held = Part::tool_request("search", Some("0".into()), Some(serde_json::json!({})));
    /// held.set_meta("interrupt", serde_json::json!({"message": "…", "budget": {
    ///     "measure": "toolCalls", "scope": "turn", "limit": 2, "used": 3, "raiseBy": 2}}));
    /// held.set_meta("interruptedBy", serde_json::json!("holdpoint/budget"));
    /// let hold = Budget::interrupted(&held).expect("a budget hold");
    /// assert_eq!((hold.measure, hold.used, hold.limit), (Measure::ToolCalls, 3.0, 2.0));
    /// let _more = hold.approve()?; // runs the call, the limit raised once
    /// # Ok::<(), holdpoint::Error>(())
    /// ```
    pub fn interrupted(part: &Part) -> Option<BudgetHold> {
        if part.interrupted_by() != Some(BUDGET) || !part.is_interrupt() {
            return None;
        }
        let request = part.as_tool_request()?;
        let data = part.meta(metadata::INTERRUPT)?;
        let budget = data.get("budget")?;
        let number = |key: &str| budget.get(key).and_then(Value::as_f64);
        Some(BudgetHold {
            tool: request.name.clone(),
            measure: Measure::parse(budget.get("measure")?.as_str()?)?,
            scope: Scope::parse(budget.get("scope")?.as_str()?)?,
            limit: number("limit")?,
            used: number("used")?,
            raise_by: number("raiseBy").unwrap_or(0.0),
            message: data
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            part: part.clone(),
        })
    }

    /// Shares this middleware for an agent.
    pub fn into_middleware(self) -> Arc<dyn Middleware> {
        Arc::new(self)
    }

    /// The first limit this call would go over, with what it would use and
    /// what it is allowed.
    fn exceeded(&self, call: &ToolHookCall) -> Option<(Limit, f64, f64)> {
        let history = call.history.as_slice();
        let this_call = ToolRequest {
            name: call.name.clone(),
            reference: call.reference.clone(),
            input: Some(call.input.clone()),
        };
        self.limits.iter().find_map(|limit| {
            let messages = in_scope(history, limit.scope);
            let used =
                self.used(messages, limit.measure, call.reference.as_deref()) + self.one(limit.measure, &this_call);
            let allowed = limit.max + raises(messages, limit.measure) as f64 * limit.step;
            (used > allowed).then_some((*limit, used, allowed))
        })
    }

    /// What `messages` used of `measure` before the call being checked (ref
    /// `current`), which the caller adds.
    fn used(&self, messages: &[Message], measure: Measure, current: Option<&str>) -> f64 {
        let mut used = 0.0;
        for message in messages.iter().filter(|m| m.role == Role::Model) {
            if measure != Measure::ToolCalls
                && let Some(usage) = stamped_usage(message)
            {
                used += match measure {
                    Measure::Tokens => tokens(&usage),
                    _ => self.cost.as_ref().map_or(0.0, |f| f(Spend::Model(&usage))),
                };
            }
            let requests: Vec<&ToolRequest> = message.content.iter().filter_map(Part::as_tool_request).collect();
            // In the message that asked for this call, only the calls before
            // it count: its later siblings have not run yet.
            let asked_here = current.and_then(|r| requests.iter().position(|q| q.reference.as_deref() == Some(r)));
            let counted = asked_here.map_or(&requests[..], |i| &requests[..i]);
            for request in counted {
                used += self.one(measure, request);
            }
        }
        used
    }

    fn one(&self, measure: Measure, request: &ToolRequest) -> f64 {
        match measure {
            Measure::Tokens => 0.0,
            Measure::ToolCalls => 1.0,
            Measure::Cost => self.cost.as_ref().map_or(0.0, |f| f(Spend::Tool(request))),
        }
    }

    fn hold(limit: Limit, used: f64, allowed: f64, tool: &str) -> ToolOutcome {
        let measure = limit.measure;
        let what = match measure {
            Measure::Cost => format!("The cost budget per {}", limit.scope.as_str()),
            _ => format!("The budget of {} per {}", measure.amount(allowed), limit.scope.as_str()),
        };
        let mut data = Map::new();
        data.insert(
            "message".into(),
            Value::String(format!(
                "{what} is reached ({} of {}): approve to raise it by {} once, or deny to stop before {tool} runs",
                measure.amount(used),
                trim(allowed),
                trim(limit.step),
            )),
        );
        data.insert(
            "budget".into(),
            json!({
                "measure": measure.as_str(),
                "scope": limit.scope.as_str(),
                "limit": measure.number(allowed),
                "used": measure.number(used),
                "raiseBy": measure.number(limit.step),
            }),
        );
        ToolOutcome::Interrupt(data)
    }
}

/// A claimed [`Budget`] hold ([`Budget::interrupted`]): the limit reached
/// and the directives that answer it.
#[derive(Debug, Clone)]
pub struct BudgetHold {
    /// The held tool.
    pub tool: String,
    /// What the limit counts.
    pub measure: Measure,
    /// Where it counts.
    pub scope: Scope,
    /// What is allowed so far (raises included).
    pub limit: f64,
    /// What the call would use, itself included.
    pub used: f64,
    /// What one approval adds to the limit.
    pub raise_by: f64,
    /// The hold's message, for people.
    pub message: String,
    part: Part,
}

impl BudgetHold {
    /// The paused request part.
    pub fn part(&self) -> &Part {
        &self.part
    }

    /// Raises the limit once: the call runs once the resume is sent.
    pub fn approve(&self) -> Result<Part> {
        self.part.restart(Some(json!({ TOOL_APPROVED: true })))
    }

    /// Stops: the call and the turn's later calls fail softly, the model
    /// told why (with the reason).
    pub fn deny(&self, reason: Option<&str>) -> Result<Part> {
        let mut data = json!({ TOOL_APPROVED: false });
        if let Some(r) = reason {
            data["reason"] = Value::String(r.to_owned());
        }
        self.part.restart(Some(data))
    }
}

fn trim(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n:.4}")
    }
}

fn tokens(usage: &Usage) -> f64 {
    let total = usage.total_tokens.unwrap_or_else(|| {
        usage
            .input_tokens
            .unwrap_or(0)
            .saturating_add(usage.output_tokens.unwrap_or(0))
    });
    total as f64
}

fn stamped_usage(message: &Message) -> Option<Usage> {
    let raw = message.metadata.as_ref()?.get(USAGE)?;
    serde_json::from_value(raw.clone()).ok()
}

/// The messages a scope counts: all of them, or those after the last user
/// message.
fn in_scope(history: &[Message], scope: Scope) -> &[Message] {
    match scope {
        Scope::Session => history,
        Scope::Turn => {
            let start = history.iter().rposition(|m| m.role == Role::User).map_or(0, |i| i + 1);
            &history[start..]
        }
    }
}

/// The tool responses of `messages` whose output is a budget stop.
fn stopped_refs(messages: &[Message]) -> Vec<(&str, Option<&str>)> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter())
        .filter_map(Part::as_tool_response)
        .filter(|r| {
            r.output
                .as_ref()
                .and_then(|o| o.get("error"))
                .and_then(Value::as_str)
                .is_some_and(|e| e.starts_with(BUDGET_STOPPED))
        })
        .map(|r| (r.name.as_str(), r.reference.as_deref()))
        .collect()
}

/// How many answered budget holds on `measure` in `messages` were approved
/// (answered, and not with a stop).
fn raises(messages: &[Message], measure: Measure) -> usize {
    let stopped = stopped_refs(messages);
    messages
        .iter()
        .filter(|m| m.role == Role::Model)
        .flat_map(|m| m.content.iter())
        .filter(|p| p.interrupted_by() == Some(BUDGET) && !p.is_interrupt())
        .filter(|p| {
            p.meta(metadata::RESOLVED_INTERRUPT)
                .and_then(|d| d.get("budget"))
                .and_then(|b| b.get("measure"))
                .and_then(Value::as_str)
                == Some(measure.as_str())
        })
        .filter_map(Part::as_tool_request)
        .filter(|r| !stopped.contains(&(r.name.as_str(), r.reference.as_deref())))
        .count()
}

fn stop(reason: Option<&str>) -> String {
    match reason.filter(|r| !r.trim().is_empty()) {
        Some(r) => format!("{BUDGET_STOPPED}; stop here and tell the user (reason: {r})"),
        None => format!("{BUDGET_STOPPED}; stop here and tell the user"),
    }
}

#[async_trait]
impl Middleware for Budget {
    fn name(&self) -> &str {
        BUDGET
    }

    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> Result<GenerateResponse> {
        let mut response = next.run(request).await?;
        let usage = serde_json::to_value(&response.usage).unwrap_or(Value::Null);
        if let Some(message) = response.message.as_mut()
            && usage.as_object().is_some_and(|u| !u.is_empty())
        {
            message
                .metadata
                .get_or_insert_with(Map::new)
                .insert(USAGE.into(), usage);
        }
        Ok(response)
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        if let Some(resumed) = &call.resumed {
            if resumed.get(TOOL_APPROVED) == Some(&Value::Bool(true)) {
                tracing::info!(tool = %call.name, "budget raised once");
                return next.run(call).await;
            }
            let reason = resumed.get("reason").and_then(Value::as_str);
            tracing::info!(tool = %call.name, "budget not raised; stopping");
            return Ok(ToolOutcome::Failed(stop(reason)));
        }
        if call.released {
            return next.run(call).await;
        }
        if !stopped_refs(in_scope(&call.history, Scope::Turn)).is_empty() {
            return Ok(ToolOutcome::Failed(stop(None)));
        }
        match self.exceeded(&call) {
            Some((limit, used, allowed)) => Ok(Self::hold(limit, used, allowed, &call.name)),
            None => next.run(call).await,
        }
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("limits", &self.limits)
            .field("cost", &self.cost.as_ref().map(|_| "fn"))
            .finish()
    }
}
