//! Approval receipts (docs/reference.md, "Approval receipts"): a call that
//! runs after a hold was answered carries a signed token binding the hold,
//! the tool, the input that runs and who decided; the tool reads it with
//! [`ToolContext::receipt`](crate::tool::ToolContext::receipt) and may hand
//! it to the service it calls, which checks it offline with
//! [`verify`].
//!
//! The signing and verifying live in the `holdpoint-receipt` crate
//! (re-exported here); an agent issues receipts once it is built with
//! [`AgentBuilder::receipts`](crate::agent::AgentBuilder::receipts).

use std::sync::Arc;

use serde_json::{Map, Value};

pub use holdpoint_receipt::{
    Actor, Decision, Expect, HoldRef, Jwk, Jwks, Quorum, Receipt, ReceiptError, ReceiptIssuer, ReceiptKey,
    ReceiptSigner, Subject, input_sha256, verify, verify_unbound,
};

use crate::hold::{Grant, HoldRule, roles_of};
use crate::message::Part;
use crate::session::{AuditDecision, HoldApproval};

/// What a turn needs to issue receipts: the issuer, the agent, and the
/// snapshot the turn resumes (with the approvals recorded on it).
#[derive(Debug, Clone)]
pub(crate) struct TurnReceipts {
    pub issuer: Arc<dyn ReceiptIssuer>,
    pub agent: String,
    pub snapshot_id: Option<String>,
    pub approvals: Vec<HoldApproval>,
}

/// What a restart decided about one paused call, as a receipt states it
/// (computed when the resume is planned; signed when the tool runs).
#[derive(Debug, Clone)]
pub(crate) struct ReceiptBasis {
    pub decision: Decision,
    pub rule: Option<HoldRule>,
}

impl ReceiptBasis {
    /// The basis of a restart of `target` by `directive`: approvals,
    /// edits and restarts get one; denials, withdrawals and expired
    /// answers none (their call does not run with a receipt).
    pub fn of_restart(target: &Part, directive: &Part) -> Option<Self> {
        let (decision, _) = crate::session::restart_decision(target, directive, chrono::Utc::now());
        let decision = match decision {
            AuditDecision::Approve => Decision::Approve,
            AuditDecision::Edit => Decision::Edit,
            AuditDecision::Restart => Decision::Restart,
            _ => return None,
        };
        Some(ReceiptBasis {
            decision,
            rule: HoldRule::on(target),
        })
    }
}

/// The id and roles of whoever the request context says decides.
fn deciding_actor(context: &Map<String, Value>) -> Actor {
    let id = context
        .get(crate::hold::ACTOR)
        .or_else(|| context.get(crate::hold::PRINCIPAL))
        .and_then(Value::as_str)
        .unwrap_or("operator")
        .to_owned();
    Actor {
        id,
        roles: roles_of(context),
    }
}

/// The token for a restarted call of `tool` (ref `reference`) about to run
/// with `input`, or `None` when the turn issues none or signing failed
/// (logged: a tool without a receipt is refused by a service that needs
/// one, never the other way round).
pub(crate) fn for_restart(
    turn: &TurnReceipts,
    basis: &ReceiptBasis,
    tool: &str,
    reference: Option<&str>,
    input: &Value,
    context: &Map<String, Value>,
) -> Option<String> {
    let mut subject = Subject::new(&turn.agent, tool, input, basis.decision);
    if let Some(id) = &turn.snapshot_id {
        subject = subject.hold(id.clone(), reference);
    }
    let last = deciding_actor(context);
    // Earlier approvals toward a quorum, then the one that resumed.
    for a in turn.approvals.iter().filter(|a| a.is_of(tool, reference)) {
        if a.actor != last.id && !subject.actors.iter().any(|x| x.id == a.actor) {
            subject.actors.push(Actor {
                id: a.actor.clone(),
                roles: Vec::new(),
            });
        }
    }
    subject.actors.push(last);
    if let Some(rule) = &basis.rule {
        let reached = u32::try_from(subject.actors.len()).unwrap_or(u32::MAX);
        subject = subject.rule(
            rule.rule.clone(),
            Some(Quorum {
                required: rule.quorum,
                reached,
            }),
        );
    }
    sign(turn, subject)
}

/// The token for a call the standing grant `grant` let through.
pub(crate) fn for_grant(turn: &TurnReceipts, grant: &Grant, tool: &str, input: &Value) -> Option<String> {
    let mut subject = Subject::new(&turn.agent, tool, input, Decision::Grant).grant(grant.id.clone());
    if let Some(rule) = &grant.rule {
        subject = subject.rule(
            rule.rule.clone(),
            Some(Quorum {
                required: rule.quorum,
                reached: 1,
            }),
        );
    }
    subject.snapshot_id = Some(grant.snapshot_id.clone());
    subject.actors.push(Actor {
        id: grant.granted_by.clone(),
        roles: grant.granter_roles.clone(),
    });
    sign(turn, subject)
}

fn sign(turn: &TurnReceipts, subject: Subject) -> Option<String> {
    match turn.issuer.issue(subject) {
        Ok(token) => Some(token),
        Err(e) => {
            tracing::warn!(error = %e, "could not sign an approval receipt; the call runs without one");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The receipt crate hashes the very canonical form the audit trail
    /// does: a receipt's `inputSha256` is the audit record's `inputHash`.
    #[test]
    fn receipt_and_audit_hash_inputs_alike() {
        for v in [
            json!({"amount": 500.0, "to": "acct-4471"}),
            json!({"b": [1e16, -3.0, 0.25, 1.5e300], "a": {"z": null, "y": "é\n\"", "x": true}}),
            json!([]),
            json!("text"),
        ] {
            assert_eq!(super::input_sha256(&v), crate::session::hash_json(&v), "{v}");
        }
    }
}
