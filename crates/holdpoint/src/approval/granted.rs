//! The rule gate's standing grants (docs/reference.md §10.9): before a
//! rule holds a call, a grant that covers it lets it run instead, spending
//! one use and appending an audit row that names the grant in the same
//! store step.
//!
//! Invariants: grants are read from the store on every check (no process
//! cache), so a revoke stops them at once on every replica; a grant
//! stands in only for holds of the rule it was given under; a rule whose
//! quorum is more than one, or whose condition failed, always holds (a
//! grant never stands in for several approvers); a grant counts only when
//! its granter could answer the call itself — the call's owner under a
//! rule that allows self-approval, anyone else with an approver role the
//! rule names (checked at each use, against the rule as it is now).

use chrono::Utc;
use serde_json::Value;

use super::gate::RuleGate;
use crate::hold::{Grant, GrantCall, GrantQuery, GrantRef, HoldRule, RULE_GATE, principal_of};
use crate::middleware::ToolHookCall;
use crate::session::{AuditDecision, AuditRecord, hash_json};

/// The request-context key under which an agent with an approval policy
/// passes the session a call runs in to its rule gate. The agent sets it
/// on every turn, over whatever a caller put there.
pub const GRANT_SESSION: &str = "holdpoint.sessionId";

/// How many active grants of one agent's tool a check reads at most.
const GRANT_SCAN: usize = 1000;

impl RuleGate {
    /// The grant that lets `call`, which `rule` would hold, run: found,
    /// its use spent and audited; `None` when no grant covers it (or the
    /// store keeps no grants, or failed: the call is held as without one).
    pub(super) async fn granted(&self, call: &ToolHookCall, rule: &HoldRule) -> Option<Grant> {
        let store = self.store.as_ref()?;
        let grants = self.grants.as_ref()?;
        if rule.quorum > 1 || rule.error.is_some() {
            return None;
        }
        let session_id = call.context.get(GRANT_SESSION).and_then(Value::as_str)?;
        let principal = principal_of(&call.context);
        let now = Utc::now();
        let query = GrantQuery {
            agent: Some(self.agent.clone()),
            tool: Some(call.name.clone()),
            active_at: Some(now),
            limit: Some(GRANT_SCAN),
        };
        let candidates = match grants.list_grants(&query).await {
            Ok(found) => found,
            Err(e) => {
                tracing::debug!(tool = %call.name, error = %e, "no standing grants read");
                return None;
            }
        };
        let variables = self.facts(call).variables();
        let facts = GrantCall {
            agent: &self.agent,
            tool: &call.name,
            session_id,
            principal,
            variables: &variables,
        };
        for grant in candidates {
            // A grant stands in only for holds of the rule it was given
            // under: another rule's approvers never answered for it.
            let same_rule = grant.rule.as_ref().is_some_and(|r| r.rule == rule.rule);
            // Its granter must be one who could answer this very call now:
            // an owner's grant never lets another person's call through.
            if !same_rule || !grant.granter_may_answer(rule, principal) || !grant.covers(&facts, now) {
                continue;
            }
            // The audit row names the session's latest snapshot: the one
            // this turn continues from.
            let snapshot_id = match store.get_latest_snapshot(session_id).await {
                Ok(latest) => latest.map(|s| s.snapshot_id).unwrap_or_default(),
                Err(_) => String::new(),
            };
            let record = AuditRecord {
                id: crate::session::mint_id(),
                at: now,
                principal: principal.map(str::to_owned),
                actor: Some(grant.granted_by.clone()),
                agent: Some(self.agent.clone()),
                session_id: session_id.to_owned(),
                snapshot_id,
                tool: call.name.clone(),
                reference: call.reference.clone(),
                input_hash: hash_json(&call.input),
                input: None,
                original_input: None,
                original_input_hash: None,
                decision: AuditDecision::Approve,
                reason: Some(format!("standing grant {} ({})", grant.id, grant.scope.as_str())),
                held_by: Some(RULE_GATE.to_owned()),
                settles: false,
                mcp: crate::session::McpOrigin::of_metadata(self.facts(call).tool_metadata),
                grant: Some(GrantRef {
                    id: grant.id.clone(),
                    granted_by: grant.granted_by.clone(),
                }),
            };
            match grants.use_grant(&grant.id, now, vec![record]).await {
                Ok(Some(used)) => return Some(used),
                // Used up or revoked since it was read: try the next.
                Ok(None) => {}
                Err(e) => tracing::warn!(grant = %grant.id, error = %e, "a standing grant could not be used"),
            }
        }
        None
    }
}
