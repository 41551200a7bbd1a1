//! The rule gate: the middleware an agent with an approval policy runs
//! outermost, and what a paused call records of the rule that governs it
//! (docs/reference.md §10.5, §10.7).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::rule::{CallFacts, Policy, Rule};
use crate::error::Result;
use crate::hold::{HoldRule, RULE_GATE};
use crate::message::metadata::{self, TOOL_APPROVED};
use crate::middleware::{DENIED, Middleware, ToolHookCall, ToolNext};
use crate::session::{GrantStore, SessionStore};
use crate::tool::ToolOutcome;

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
    /// The agent's store's grants (the agent's builder refuses a store
    /// without them under a policy, so `None` only without a store).
    pub(super) grants: Option<Arc<dyn GrantStore>>,
}

impl RuleGate {
    pub(crate) fn new(
        agent: String,
        policy: Arc<Policy>,
        self_asking: HashSet<String>,
        tool_metadata: HashMap<String, Map<String, Value>>,
        store: Option<Arc<dyn SessionStore>>,
        grants: Option<Arc<dyn GrantStore>>,
    ) -> Self {
        RuleGate {
            agent,
            policy,
            self_asking,
            tool_metadata,
            store,
            grants,
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
