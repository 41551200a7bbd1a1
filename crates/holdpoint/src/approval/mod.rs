//! Approval rules: who may answer a hold, how many must agree, and the
//! condition over the call that makes a rule apply (docs/reference.md §10.5).
//!
//! A [`Policy`] is an ordered list of [`Rule`]s built from [`RuleSpec`]s (the
//! shape of a `[[approval.rules]]` table). The first rule whose agent, tool
//! and condition match a call governs it; no match keeps ToolApproval's own
//! behaviour. A condition that does not compile is a [`PolicyError`] when the
//! policy is built, never a silent allow; one that fails to evaluate holds
//! the call under its rule, with the error on the hold.
//!
//! An agent takes a policy with
//! [`AgentBuilder::approval_policy`](crate::agent::AgentBuilder::approval_policy):
//! a covered call is held (also when ToolApproval would let it run) with
//! the rule recorded on the paused part under `approvalRule` ([`HoldRule`]);
//! a resumable tool that asks for approval itself (it declares an
//! [`ApprovalReply`]) runs and pauses as before, its interrupt annotated
//! the same way.
//!
//! Principals carry roles: the request context holds them under [`ROLES`]
//! (an array of strings) beside the principal.

mod gate;
mod granted;
mod rule;

pub(crate) use gate::RuleGate;
pub use granted::GRANT_SESSION;
pub use rule::{CallFacts, NamePattern, Policy, PolicyError, PolicyField, Rule, RuleSpec};

pub use crate::hold::{
    ApprovalReply, Condition, ConditionError, Grant, GrantCall, GrantQuery, GrantRef, GrantRequest, GrantScope,
    GrantTtl, HoldRule, MAX_GRANT_TTL, ROLES, RULE_GATE, Refusal, ReplyShape, parse_ttl, roles_of,
};
