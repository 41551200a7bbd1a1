//! What a held call carries and what may answer it, as plain data below
//! the middleware, tools, review and stores that read it: the rule that
//! governs a hold ([`HoldRule`]), the yes/no reply a resumable tool asks
//! for ([`ApprovalReply`]), standing grants ([`Grant`]) and the CEL
//! conditions that narrow them ([`Condition`]). `approval` (the policy and
//! the middleware that enforce it) re-exports all of it, and its public
//! paths are those.

use serde_json::{Map, Value};

mod condition;
mod grant;
mod reply;
mod rule;

pub use condition::{Condition, ConditionError};
pub use grant::{Grant, GrantCall, GrantQuery, GrantRef, GrantRequest, GrantScope, GrantTtl, MAX_GRANT_TTL, parse_ttl};
pub use reply::{ApprovalReply, ReplyShape};
pub use rule::{HoldRule, RULE_GATE, Refusal, roles_of};

/// The request-context key for the caller's roles (an array of strings).
pub const ROLES: &str = "roles";

/// The request-context key holding the authenticated principal (a string).
/// Sessions belong to the principal that starts them.
pub const PRINCIPAL: &str = "principal";

/// The request-context key naming the individual who acts (an approver's
/// user name, say) when it differs from the owning principal; recorded in
/// the audit trail.
pub const ACTOR: &str = "actor";

/// The principal in a request context.
pub fn principal_of(context: &Map<String, Value>) -> Option<&str> {
    context.get(PRINCIPAL).and_then(Value::as_str)
}

/// The individual who acts: [`ACTOR`], else the principal.
pub(crate) fn actor_of(context: &Map<String, Value>) -> Option<&str> {
    context
        .get(ACTOR)
        .and_then(Value::as_str)
        .or_else(|| principal_of(context))
}
