//! The record of the rule that governs a paused call ([`HoldRule`]), and
//! who may answer it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ROLES;
use crate::error::Error;
use crate::message::Part;
use crate::message::metadata;

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
    /// The rule a paused part records, if any.
    pub fn on(part: &Part) -> Option<HoldRule> {
        HoldRule::deserialize(part.meta(metadata::APPROVAL_RULE)?).ok()
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

/// The caller's roles in a request context (under [`ROLES`]).
pub fn roles_of(context: &Map<String, Value>) -> Vec<String> {
    context
        .get(ROLES)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}
