//! Approval rules: who may answer a hold, how many must agree, and the
//! condition over the call that makes a rule apply (docs/reference.md §10.5).
//!
//! A [`Policy`] is an ordered list of [`Rule`]s built from [`RuleSpec`]s (the
//! shape of a `[[approval.rules]]` table). The first rule whose agent, tool
//! and condition match a call governs it; no match keeps ToolApproval's own
//! behaviour. A condition that does not compile is a [`PolicyError`] when the
//! policy is built, never a silent allow.
//!
//! Principals carry roles: the request context holds them under [`ROLES`]
//! (an array of strings) beside the principal.

mod condition;
mod rule;

pub use condition::{Condition, ConditionError};
pub use rule::{CallFacts, NamePattern, Policy, PolicyError, PolicyField, Rule, RuleSpec};

/// The request-context key for the caller's roles (an array of strings).
pub const ROLES: &str = "roles";
