//! The rule gate: the middleware an agent with an approval policy runs
//! outermost, and what a paused call records of the rule that governs it
//! (docs/reference.md §10.5, §10.7).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rule::{CallFacts, Policy, Rule};
use crate::error::{Error, Result};
use crate::message::Part;
use crate::message::metadata::{self, TOOL_APPROVED};
use crate::middleware::{DENIED, Middleware, ToolHookCall, ToolNext};
use crate::session::SessionStore;
use crate::tool::ToolOutcome;

/// The name the rule gate records as `interruptedBy` on its holds.
pub const RULE_GATE: &str = "holdpoint/approvalRule";

/// The rule that governs a paused call, as the part carries it under
/// `approvalRule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldRule {
    /// The rule's name.
    pub rule: String,
    /// The roles that may see and answer the hold.
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve.
    pub quorum: u32,
    /// Whether the session's owner may answer.
    pub self_approval: bool,
    /// Why the rule's condition could not be evaluated: the call is held
    /// under this rule rather than let through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether approving asks the approver to confirm first (the rule's
    /// `confirm`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirm: bool,
    /// Reasons offered for a denial (the rule's `deny_reasons`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_reasons: Vec<String>,
    /// Whether a denial must give a reason (the rule's `reason_required`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reason_required: bool,
    /// Paths of the input its hold masks (the rule's `redact`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact: Vec<String>,
    /// Whether the hold needs a full preview to be approvable (the rule's
    /// `require_preview`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_preview: bool,
}

/// Why an answer to a rule's hold was refused: the rule and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval rule \"{rule}\" refuses this answer: {why}")]
pub struct Refusal {
    /// The rule's name.
    pub rule: String,
    /// What is wrong.
    pub why: String,
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::PermissionDenied(r.to_string())
    }
}

impl HoldRule {
    /// The record of `rule`.
    pub fn of_rule(rule: &Rule) -> Self {
        HoldRule {
            rule: rule.name.clone(),
            approvers: rule.approvers.clone(),
            quorum: rule.quorum,
            self_approval: rule.self_approval,
            error: None,
            confirm: rule.confirm,
            deny_reasons: rule.deny_reasons.clone(),
            reason_required: rule.reason_required,
            redact: rule.redact.paths().map(str::to_owned).collect(),
            require_preview: rule.require_preview,
        }
    }

    /// The rule a paused part records, if any.
    pub fn on(part: &Part) -> Option<HoldRule> {
        serde_json::from_value(part.meta(metadata::APPROVAL_RULE)?.clone()).ok()
    }

    /// Whether a caller with `roles` is one of its approvers.
    pub fn is_approver(&self, roles: &[String]) -> bool {
        roles.iter().any(|r| self.approvers.contains(r))
    }

    /// Whether `actor` (with `roles`) may answer a hold of a session owned
    /// by `owner`: the owner only when self-approval is on (and then
    /// whatever their roles), anyone else only with an approver role.
    pub fn may_answer(&self, actor: &str, owner: Option<&str>, roles: &[String]) -> std::result::Result<(), Refusal> {
        let refuse = |why: String| Refusal {
            rule: self.rule.clone(),
            why,
        };
        if owner == Some(actor) {
            return if self.self_approval {
                Ok(())
            } else {
                Err(refuse(format!(
                    "\"{actor}\" owns the session and self-approval is off; an approver ({}) must answer",
                    self.approvers.join(", ")
                )))
            };
        }
        if self.is_approver(roles) {
            Ok(())
        } else {
            Err(refuse(format!(
                "\"{actor}\" has none of the approver roles ({})",
                self.approvers.join(", ")
            )))
        }
    }
}

/// The caller's roles in a request context (under [`ROLES`](super::ROLES)).
pub fn roles_of(context: &Map<String, Value>) -> Vec<String> {
    context
        .get(super::ROLES)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Holds every call a policy's rule covers before anything else sees it,
/// recording the rule on the hold; annotates the own interrupts of tools
/// that ask for approval themselves (they run, and pause, instead).
pub(crate) struct RuleGate {
    pub(super) agent: String,
    policy: Arc<Policy>,
    /// Tools that pause for approval themselves (they declare an
    /// [`ApprovalReply`](super::ApprovalReply)).
    self_asking: HashSet<String>,
    /// The definition metadata of the tools that have any (MCP tools'
    /// server, tool and annotations), which conditions can read.
    tool_metadata: HashMap<String, Map<String, Value>>,
    /// Where standing grants are read (the agent's store).
    pub(super) store: Option<Arc<dyn SessionStore>>,
}

impl RuleGate {
    pub(crate) fn new(
        agent: String,
        policy: Arc<Policy>,
        self_asking: HashSet<String>,
        tool_metadata: HashMap<String, Map<String, Value>>,
        store: Option<Arc<dyn SessionStore>>,
    ) -> Self {
        RuleGate {
            agent,
            policy,
            self_asking,
            tool_metadata,
            store,
        }
    }

    /// What a condition knows of `call`.
    pub(super) fn facts<'a>(&'a self, call: &'a ToolHookCall) -> CallFacts<'a> {
        CallFacts {
            agent: &self.agent,
            tool: &call.name,
            input: &call.input,
            context: &call.context,
            tool_metadata: self.tool_metadata.get(&call.name),
        }
    }

    /// The rule that governs `call`: the first that matches, or the first
    /// whose condition failed to evaluate (held under it, with the error:
    /// never a silent allow).
    fn governing(&self, call: &ToolHookCall) -> Option<HoldRule> {
        let facts = self.facts(call);
        for rule in self.policy.rules() {
            match rule.matches(&facts) {
                Ok(false) => {}
                Ok(true) => return Some(HoldRule::of_rule(rule)),
                Err(e) => {
                    tracing::warn!(tool = %call.name, rule = %rule.name, error = %e, "approval rule failed to evaluate; holding the call");
                    return Some(HoldRule {
                        error: Some(e.to_string()),
                        ..HoldRule::of_rule(rule)
                    });
                }
            }
        }
        None
    }
}

impl RuleGate {
    /// Records `rule` on a hold: the rule itself (moved to the part's
    /// `approvalRule` metadata, where notification routing reads its
    /// approvers; the interrupt data stays the tool's or the gate's own,
    /// docs/reference.md §10.5) and its timers' deadlines (§11.3).
    fn carry(&self, data: &mut Map<String, Value>, rule: &HoldRule, oversize: Option<String>) {
        if let Ok(value) = serde_json::to_value(rule) {
            data.insert(metadata::CARRIED_META[0].0.to_owned(), value);
        }
        if let Some(governing) = self.policy.rules().iter().find(|r| r.name == rule.rule) {
            governing.timers.stamp(data, chrono::Utc::now());
        }
        if let Some(reason) = oversize {
            data.insert(metadata::CARRIED_META[4].0.to_owned(), Value::String(reason));
        }
    }

    /// Why `input` is too large for `rule`'s approvers to review as is,
    /// when the rule sets `max_review_bytes` and it is.
    fn oversize(&self, rule: &HoldRule, input: &Value) -> Option<String> {
        let max = self
            .policy
            .rules()
            .iter()
            .find(|r| r.name == rule.rule)?
            .max_review_bytes?;
        let size = serde_json::to_vec(input).map_or(0, |v| v.len());
        (size > max).then(|| {
            format!(
                "the input is {size} bytes; approval rule \"{}\" lets approvers review up to {max} bytes: deny it or edit it",
                rule.rule
            )
        })
    }
}

#[async_trait]
impl Middleware for RuleGate {
    fn name(&self) -> &str {
        RULE_GATE
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        if let Some(resumed) = &call.resumed {
            // A restart of this gate's own hold; the claim checked that an
            // authorised approver answered and the quorum is met.
            if call.original_input.is_some() {
                if let Some(rule) = self.governing(&call) {
                    let mut data = Map::new();
                    data.insert(
                        "message".into(),
                        Value::String(format!("approval rule \"{}\" holds the revised call", rule.rule)),
                    );
                    let oversize = self.oversize(&rule, &call.input);
                    self.carry(&mut data, &rule, oversize);
                    return Ok(ToolOutcome::Interrupt(data));
                }
                return next.run(call).await;
            }
            if resumed.get(TOOL_APPROVED) == Some(&Value::Bool(true)) {
                return next.run(call).await;
            }
            return Ok(ToolOutcome::Failed(
                match resumed
                    .get("reason")
                    .and_then(Value::as_str)
                    .filter(|r| !r.trim().is_empty())
                {
                    Some(r) => format!("{DENIED}; reason: {r}"),
                    None => format!("{DENIED}; do not retry it unless the user asks again"),
                },
            ));
        }
        if call.released {
            return next.run(call).await;
        }
        let Some(rule) = self.governing(&call) else {
            return next.run(call).await;
        };
        if self.self_asking.contains(&call.name) && rule.error.is_none() {
            // An edited restart of the tool's own question: the answer was
            // to the old input, so the tool asks again about the revised
            // call and the rule's approvers (and quorum) decide it.
            let oversize = self.oversize(&rule, &call.input);
            let next = if call.original_input.is_some() {
                next.asking_again()
            } else {
                next
            };
            return Ok(match next.run(call).await? {
                ToolOutcome::Interrupt(mut data) => {
                    self.carry(&mut data, &rule, oversize);
                    ToolOutcome::Interrupt(data)
                }
                other => other,
            });
        }
        let oversize = self.oversize(&rule, &call.input);
        // A grant approves ahead of time; a call too large to review, or
        // under a rule that wants each call previewed, is never approved
        // unseen, so no grant lets it through.
        if oversize.is_none()
            && !rule.require_preview
            && let Some(grant) = self.granted(&call, &rule).await
        {
            tracing::debug!(tool = %call.name, grant = %grant.id, "a standing grant lets the call run");
            return next.granted_by(&grant).run(call).await;
        }
        let mut data = Map::new();
        let message = match &rule.error {
            Some(e) => format!(
                "approval rule \"{}\" holds {} (its condition failed: {e})",
                rule.rule, call.name
            ),
            None => format!("approval rule \"{}\" holds {}", rule.rule, call.name),
        };
        data.insert("message".into(), Value::String(message));
        self.carry(&mut data, &rule, oversize);
        Ok(ToolOutcome::Interrupt(data))
    }
}
