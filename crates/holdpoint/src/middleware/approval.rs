//! `ToolApproval`: holds tool calls for a person's approval unless an
//! allowlist, a predicate, a policy or a judge model lets them run
//! (docs/reference.md §10, §10.3).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Map, Value, json};

use super::{Middleware, ToolHookCall, ToolNext};
use crate::error::Result;
use crate::message::metadata::TOOL_APPROVED;
use crate::message::{Message, Part, Role, json_eq, metadata};
use crate::model::{ChunkSink, GenerateRequest, Model};
use crate::tool::ToolOutcome;

/// The name ToolApproval records as `interruptedBy` on its holds.
pub const TOOL_APPROVAL: &str = "genkit-middleware/toolApproval";

/// The start of every denial the model sees.
pub const DENIED: &str = "the tool call was denied";

/// What a policy decides about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Refuse it; the model is told why.
    Deny(String),
    /// Hold it for a person.
    Ask,
}

type Predicate = Arc<dyn Fn(&Value) -> bool + Send + Sync>;
type Policy = Arc<dyn Fn(&ToolHookCall) -> Verdict + Send + Sync>;

#[derive(Clone)]
struct Judge {
    model: Arc<dyn Model>,
    instructions: String,
}

/// Holds every tool call outside an allowlist until a person approves it.
///
/// Approve with a restart whose resume data is `{"toolApproved": true}`
/// (see [`ApprovalHold::approve`]); a denial (`false`, or a bare restart)
/// reaches the model as a soft failure that starts with
/// "the tool call was denied".
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::middleware::ToolApproval;
/// let gate = ToolApproval::allow(["getBalance"])
///     .approval_when("transferMoney", |input| input["amount"].as_f64().unwrap_or(0.0) > 1000.0)
///     .ttl(std::time::Duration::from_secs(3600));
/// # let _ = Arc::new(gate);
/// ```
#[derive(Clone)]
pub struct ToolApproval {
    allowed: HashSet<String>,
    predicates: HashMap<String, Predicate>,
    policy: Option<Policy>,
    judge: Option<Judge>,
    ttl: Option<Duration>,
    loop_guard: bool,
}

impl ToolApproval {
    /// Tools in `allowed` run; every other call is held.
    pub fn allow<S: Into<String>>(allowed: impl IntoIterator<Item = S>) -> Self {
        ToolApproval {
            allowed: allowed.into_iter().map(Into::into).collect(),
            predicates: HashMap::new(),
            policy: None,
            judge: None,
            ttl: None,
            loop_guard: true,
        }
    }

    /// Calls of `tool` are held only when `needs_approval(input)` is true;
    /// the others run.
    pub fn approval_when(
        mut self,
        tool: impl Into<String>,
        needs_approval: impl Fn(&Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.predicates.insert(tool.into(), Arc::new(needs_approval));
        self
    }

    /// Decides calls that are neither allowlisted nor covered by a
    /// predicate (before the judge, if any).
    pub fn policy(mut self, policy: impl Fn(&ToolHookCall) -> Verdict + Send + Sync + 'static) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Asks `model` to judge calls that nothing else decided: it answers
    /// allow, deny or ask. Anything else, or a failure, holds the call.
    pub fn judge(mut self, model: Arc<dyn Model>, instructions: impl Into<String>) -> Self {
        self.judge = Some(Judge {
            model,
            instructions: instructions.into(),
        });
        self
    }

    /// Holds expire after `ttl`: an answer after it is an "approval
    /// expired" soft failure, and listings show the hold as expired.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Whether a call denied earlier in the turn is refused without asking
    /// again (default: yes).
    pub fn loop_guard(mut self, on: bool) -> Self {
        self.loop_guard = on;
        self
    }

    /// Shares this middleware for an agent.
    pub fn into_middleware(self) -> Arc<dyn Middleware> {
        Arc::new(self)
    }

    /// Claims a hold raised by a ToolApproval (not a tool's own interrupt,
    /// not another middleware's hold, not an answered one). A sub-agent
    /// call that surfaced its child's holds is seen through: when exactly
    /// one of them is a ToolApproval hold, that one is claimed under its
    /// compound ref, answerable at the root (with several, claim each from
    /// [`AgentOutput::holds`](crate::agent::AgentOutput::holds)).
    pub fn interrupted(part: &Part) -> Option<ApprovalHold> {
        if crate::message::surfaced::SurfacedHold::is_surfaced(part) {
            let mut ours = crate::message::surfaced::answerable(part)
                .iter()
                .filter_map(Self::interrupted)
                .collect::<Vec<_>>()
                .into_iter();
            let first = ours.next()?;
            return ours.next().is_none().then_some(first);
        }
        let by = part.interrupted_by()?;
        let ours = by == TOOL_APPROVAL || by.strip_prefix(TOOL_APPROVAL).is_some_and(|rest| rest.starts_with('#'));
        if !ours || !part.is_interrupt() {
            return None;
        }
        let req = part.as_tool_request()?;
        Some(ApprovalHold {
            tool: req.name.clone(),
            input: req.input.clone().unwrap_or(Value::Null),
            message: part
                .interrupt_data()
                .and_then(|d| d.get("message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default(),
            part: part.clone(),
        })
    }

    fn hold(&self, call: &ToolHookCall, why: Option<&str>) -> ToolOutcome {
        let mut data = Map::new();
        let message = match why {
            Some(w) => format!("Tool not in approved list: {} ({w})", call.name),
            None => format!("Tool not in approved list: {}", call.name),
        };
        data.insert("message".into(), Value::String(message));
        if let Some(ttl) = self.ttl {
            // A TTL too large to represent means "never expires".
            let at = chrono::Duration::from_std(ttl)
                .ok()
                .and_then(|d| Utc::now().checked_add_signed(d))
                .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC);
            data.insert(
                metadata::EXPIRES_AT.into(),
                Value::String(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            );
        }
        ToolOutcome::Interrupt(data)
    }

    async fn decide(&self, call: &ToolHookCall) -> Verdict {
        if self.allowed.contains(&call.name) {
            return Verdict::Allow;
        }
        if let Some(pred) = self.predicates.get(&call.name) {
            return if pred(&call.input) {
                Verdict::Ask
            } else {
                Verdict::Allow
            };
        }
        if let Some(policy) = &self.policy {
            match policy(call) {
                Verdict::Ask => {}
                decided => return decided,
            }
        }
        if let Some(judge) = &self.judge {
            return match ask_judge(judge, call).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(tool = %call.name, error = %e, "approval judge failed; holding the call");
                    Verdict::Ask
                }
            };
        }
        Verdict::Ask
    }
}

async fn ask_judge(judge: &Judge, call: &ToolHookCall) -> Result<Verdict> {
    let system = Message::new(
        Role::System,
        vec![Part::text(format!(
            "{}\nAnswer with exactly one word: allow, deny or ask.",
            judge.instructions
        ))],
    );
    let user = Message::user_text(format!("Tool: {}\nInput: {}", call.name, call.input));
    let response = judge
        .model
        .generate(GenerateRequest::new(vec![system, user]), ChunkSink::none())
        .await?;
    let text = response.text().trim().to_lowercase();
    let word: String = text.chars().take_while(|c| c.is_alphabetic()).collect();
    Ok(match word.as_str() {
        "allow" => Verdict::Allow,
        "deny" => Verdict::Deny(format!("the policy judge refused it: {}", response.text().trim())),
        _ => Verdict::Ask,
    })
}

fn denial(reason: Option<&str>) -> String {
    match reason.filter(|r| !r.trim().is_empty()) {
        Some(r) => format!("{DENIED}; reason: {r}"),
        None => format!("{DENIED}; do not retry it unless the user asks again"),
    }
}

/// Whether the same call (name and input) was denied earlier in this turn.
fn denied_earlier(call: &ToolHookCall) -> bool {
    let history = call.history.as_slice();
    let turn_start = history.iter().rposition(|m| m.role == Role::User).map_or(0, |i| i + 1);
    let turn = &history[turn_start..];
    let denied_refs: Vec<(&str, Option<&str>)> = turn
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter())
        .filter_map(Part::as_tool_response)
        .filter(|r| {
            r.output
                .as_ref()
                .and_then(|o| o.get("error"))
                .and_then(Value::as_str)
                .is_some_and(|e| e.starts_with(DENIED))
        })
        .map(|r| (r.name.as_str(), r.reference.as_deref()))
        .collect();
    if denied_refs.is_empty() {
        return false;
    }
    turn.iter()
        .filter(|m| m.role == Role::Model)
        .flat_map(|m| m.content.iter())
        .filter_map(Part::as_tool_request)
        .any(|r| {
            r.name == call.name
                && json_eq(r.input.as_ref().unwrap_or(&Value::Null), &call.input)
                && denied_refs.contains(&(r.name.as_str(), r.reference.as_deref()))
        })
}

#[async_trait]
impl Middleware for ToolApproval {
    fn name(&self) -> &str {
        TOOL_APPROVAL
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        if let Some(resumed) = &call.resumed {
            if call.original_input.is_some() {
                return Ok(self.hold(&call, Some("the input changed; approve the revised call")));
            }
            if resumed.get(TOOL_APPROVED) == Some(&Value::Bool(true)) {
                tracing::info!(tool = %call.name, "tool call approved");
                return next.run(call).await;
            }
            let reason = resumed.get("reason").and_then(Value::as_str);
            tracing::info!(tool = %call.name, "tool call denied");
            return Ok(ToolOutcome::Failed(denial(reason)));
        }
        if call.released {
            return next.run(call).await;
        }
        if self.loop_guard && denied_earlier(&call) {
            return Ok(ToolOutcome::Failed(format!(
                "{DENIED} earlier in this turn; the same call is not asked again"
            )));
        }
        match self.decide(&call).await {
            Verdict::Allow => next.run(call).await,
            Verdict::Deny(reason) => Ok(ToolOutcome::Failed(denial(Some(&reason)))),
            Verdict::Ask => Ok(self.hold(&call, None)),
        }
    }
}

/// A claimed ToolApproval hold: what is asked, and the directives that
/// answer it.
#[derive(Debug, Clone)]
pub struct ApprovalHold {
    /// The held tool.
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// The hold's message ("Tool not in approved list: NAME").
    pub message: String,
    part: Part,
}

impl ApprovalHold {
    /// The paused request part.
    pub fn part(&self) -> &Part {
        &self.part
    }

    /// Approves the call: it runs once the resume is sent.
    pub fn approve(&self, reason: Option<&str>) -> Result<Part> {
        self.answer(true, reason)
    }

    /// Denies the call: the model is told, with the reason.
    pub fn deny(&self, reason: Option<&str>) -> Result<Part> {
        self.answer(false, reason)
    }

    fn answer(&self, approved: bool, reason: Option<&str>) -> Result<Part> {
        let mut data = json!({ TOOL_APPROVED: approved });
        if let Some(r) = reason {
            data["reason"] = Value::String(r.to_owned());
        }
        self.part.restart(Some(data))
    }
}

impl std::fmt::Debug for ToolApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolApproval")
            .field("allowed", &self.allowed)
            .field("ttl", &self.ttl)
            .field("loop_guard", &self.loop_guard)
            .finish()
    }
}
