//! Standing grants (docs/reference.md §10.9): an approver's "approve, and
//! don't ask again", scoped to a session, a principal or an agent's tool,
//! optionally narrowed by a CEL condition over the call, a lifetime and a
//! number of uses.
//!
//! Invariants: a grant matches only while it is not revoked, not expired
//! and has uses left; its condition failing to evaluate is no match (never
//! a silent allow); a use is a compare-and-set in the store, so one use is
//! never spent twice.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::condition::Condition;
use super::rule::HoldRule;
use crate::error::{Error, Result};

/// What a grant covers besides its agent and tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantScope {
    /// Later calls of the same session.
    Session,
    /// Later calls in any session of the same principal (the owner of the
    /// session the grant was given in).
    Principal,
    /// Later calls of the agent's tool, whoever's session.
    Tool,
}

impl GrantScope {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Session => "session",
            GrantScope::Principal => "principal",
            GrantScope::Tool => "tool",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "session" => Ok(GrantScope::Session),
            "principal" => Ok(GrantScope::Principal),
            "tool" => Ok(GrantScope::Tool),
            other => Err(Error::InvalidArgument(format!(
                "unknown grant scope {other:?}: use session, principal or tool"
            ))),
        }
    }
}

/// The grant an approver asks for with an approval: `{"scope", "when"?,
/// "ttl"?, "uses"?}`.
///
/// ```
/// use std::time::Duration;
/// use holdpoint::approval::{GrantRequest, GrantScope};
/// let grant = GrantRequest::new(GrantScope::Session)
///     .ttl(Duration::from_secs(3600))
///     .uses(3)
///     .when("input.amount < 100");
/// // On the wire the lifetime stays a string.
/// assert_eq!(
///     serde_json::to_value(&grant).unwrap(),
///     serde_json::json!({"scope": "session", "when": "input.amount < 100", "ttl": "1h", "uses": 3})
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantRequest {
    /// What it covers.
    pub scope: GrantScope,
    /// A CEL condition over the call (the variables of a rule's condition,
    /// §10.5) that later calls must meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// How long it lasts (`"30m"`, `"1h"`, `"2d"` on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<GrantTtl>,
    /// How many calls it lets through (at least 1; unlimited when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<u32>,
}

impl GrantRequest {
    /// A grant of `scope` with no condition, lifetime or use limit.
    pub fn new(scope: GrantScope) -> Self {
        GrantRequest {
            scope,
            when: None,
            ttl: None,
            uses: None,
        }
    }

    /// The same grant, lasting `ttl` (more than zero, at most
    /// [`MAX_GRANT_TTL`]; checked when the answer is given).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(GrantTtl::from(ttl));
        self
    }

    /// The same grant, letting `uses` calls through (at least 1).
    pub fn uses(mut self, uses: u32) -> Self {
        self.uses = Some(uses);
        self
    }

    /// The same grant, for calls that meet the CEL condition `when`.
    pub fn when(mut self, when: impl Into<String>) -> Self {
        self.when = Some(when.into());
        self
    }
}

/// A grant's lifetime: a [`Duration`] in Rust, a string of
/// `<integer><unit>` parts on the wire (`"30m"`, `"1h30m"`, `"2d"`; units
/// `s`, `m`, `h`, `d`). Decoding checks it ([`parse_ttl`]); one built from
/// a `Duration` is checked when the answer that asks for it is given.
///
/// ```
/// use std::time::Duration;
/// use holdpoint::approval::GrantTtl;
/// let ttl: GrantTtl = "1h30m".parse().unwrap();
/// assert_eq!(ttl.as_duration(), Duration::from_secs(5400));
/// assert_eq!(ttl.to_string(), "1h30m");
/// assert!("forever".parse::<GrantTtl>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrantTtl(Duration);

impl GrantTtl {
    /// The lifetime.
    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// The lifetime, checked: more than zero whole seconds and at most
    /// [`MAX_GRANT_TTL`].
    pub fn checked(self) -> Result<Duration> {
        if self.0.as_secs() == 0 {
            return Err(Error::InvalidArgument(format!(
                "grant ttl {self}: must be at least one second"
            )));
        }
        if self.0 > MAX_GRANT_TTL {
            return Err(Error::InvalidArgument(format!(
                "grant ttl {self}: longer than 366 days"
            )));
        }
        Ok(self.0)
    }
}

impl From<Duration> for GrantTtl {
    fn from(ttl: Duration) -> Self {
        GrantTtl(ttl)
    }
}

impl From<GrantTtl> for Duration {
    fn from(ttl: GrantTtl) -> Self {
        ttl.0
    }
}

impl std::str::FromStr for GrantTtl {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        parse_ttl(text).map(GrantTtl)
    }
}

impl std::fmt::Display for GrantTtl {
    /// Whole seconds in days, hours, minutes and seconds: `1d2h`, `90s`
    /// is `1m30s`, zero is `0s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut left = self.0.as_secs();
        if left == 0 {
            return f.write_str("0s");
        }
        for (unit, seconds) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
            if left >= seconds {
                write!(f, "{}{unit}", left / seconds)?;
                left %= seconds;
            }
        }
        Ok(())
    }
}

impl Serialize for GrantTtl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GrantTtl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|e: Error| serde::de::Error::custom(e))
    }
}

/// The longest lifetime a grant may have: 366 days.
pub const MAX_GRANT_TTL: Duration = Duration::from_secs(366 * 86_400);

/// Parses a lifetime: a sequence of `<integer><unit>` (`s`, `m`, `h`,
/// `d`), more than zero and at most [`MAX_GRANT_TTL`].
pub fn parse_ttl(text: &str) -> Result<Duration> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "grant ttl {text:?}: {why} (write e.g. \"30m\", \"1h\", \"2d\")"
        ))
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let n: u64 = number.parse().map_err(|_| bad("not a number and a unit"))?;
        let seconds = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            _ => return Err(bad("unknown unit")),
        };
        total = total.saturating_add(n.saturating_mul(seconds));
        rest = tail.trim_start();
    }
    let ttl = Duration::from_secs(total);
    if ttl.is_zero() {
        return Err(bad("zero"));
    }
    if ttl > MAX_GRANT_TTL {
        return Err(bad("longer than 366 days"));
    }
    Ok(ttl)
}

/// A standing grant as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The grant's id.
    pub id: String,
    /// The agent whose calls it covers.
    pub agent: String,
    /// The tool whose calls it covers.
    pub tool: String,
    /// What else it covers.
    pub scope: GrantScope,
    /// The session it was given in (what a `session` grant covers).
    pub session_id: String,
    /// The owner of that session (what a `principal` grant covers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The condition later calls must meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// When it stops matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// The uses left (`None`: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_left: Option<u32>,
    /// How many calls it let through.
    #[serde(default)]
    pub used: u64,
    /// Who granted it (the approver who answered the hold).
    pub granted_by: String,
    /// The roles of the rule's approvers the granter held when granting
    /// (empty for an owner who answered under self-approval). At each use
    /// the granter must still be one who could answer the call: the
    /// call's owner under a rule that allows self-approval, or someone
    /// holding one of these roles that the rule names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granter_roles: Vec<String>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The held snapshot whose answer created it.
    pub snapshot_id: String,
    /// The rule that governed that hold: who may list and revoke it
    /// (`None`: a hold no rule governed, the session owner's alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<HoldRule>,
    /// When it was revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
    /// Who revoked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

/// The call a grant is checked against.
#[derive(Debug, Clone, Copy)]
pub struct GrantCall<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The session the call runs in.
    pub session_id: &'a str,
    /// The session's owner (the run's principal).
    pub principal: Option<&'a str>,
    /// The variables the grant's condition sees.
    pub variables: &'a Map<String, Value>,
}

impl Grant {
    /// Whether its granter could answer a hold of `rule` on a call of a
    /// session owned by `owner`: the owner only under self-approval,
    /// anyone else only with an approver role the rule names.
    pub fn granter_may_answer(&self, rule: &HoldRule, owner: Option<&str>) -> bool {
        if owner == Some(self.granted_by.as_str()) {
            return rule.self_approval;
        }
        rule.is_approver(&self.granter_roles)
    }

    /// Whether the grant can still be used at `now`: not revoked, not
    /// expired, uses left.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|t| t > now) && self.uses_left.is_none_or(|n| n > 0)
    }

    /// Whether it covers `call` at `now` (active, same agent and tool, in
    /// scope, its condition met; a condition that does not compile or
    /// evaluate is no match).
    pub fn covers(&self, call: &GrantCall<'_>, now: DateTime<Utc>) -> bool {
        if !self.is_active(now) || self.agent != call.agent || self.tool != call.tool {
            return false;
        }
        let in_scope = match self.scope {
            GrantScope::Session => self.session_id == call.session_id,
            GrantScope::Principal => self.principal.is_some() && self.principal.as_deref() == call.principal,
            GrantScope::Tool => true,
        };
        if !in_scope {
            return false;
        }
        match &self.when {
            None => true,
            Some(source) => match Condition::compile(source).and_then(|c| c.evaluate(call.variables)) {
                Ok(met) => met,
                Err(e) => {
                    tracing::warn!(grant = %self.id, error = %e, "a grant's condition failed; it does not apply");
                    false
                }
            },
        }
    }

    /// The grant after one use at `now`, or `None` when it cannot be used
    /// (the compare-and-set every store applies under its lock).
    pub fn used_once(&self, now: DateTime<Utc>) -> Option<Grant> {
        if !self.is_active(now) {
            return None;
        }
        let mut next = self.clone();
        next.uses_left = self.uses_left.map(|n| n - 1);
        next.used = self.used.saturating_add(1);
        Some(next)
    }

    /// The grant revoked by `by` at `at`; `None` when it already was.
    pub fn revoked(&self, by: &str, at: DateTime<Utc>) -> Option<Grant> {
        if self.revoked_at.is_some() {
            return None;
        }
        let mut next = self.clone();
        next.revoked_at = Some(at);
        next.revoked_by = Some(by.to_owned());
        Some(next)
    }

    /// Whether a caller (`principal`, `roles`) may list and revoke it:
    /// whoever may answer the holds it stands in for — an approver of its
    /// rule, or the session owner when the rule lets the owner answer (or
    /// no rule governs).
    pub fn manageable_by(&self, principal: Option<&str>, roles: &[String]) -> bool {
        let is_owner = self.principal.is_none() || self.principal.as_deref() == principal;
        match &self.rule {
            Some(rule) => rule.is_approver(roles) || (is_owner && rule.self_approval && principal.is_some()),
            None => is_owner,
        }
    }
}

/// Which grants to list (filters combine; newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantQuery {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only those usable at this time (not revoked, not expired, uses left).
    pub active_at: Option<DateTime<Utc>>,
    /// At most this many (default 100).
    pub limit: Option<usize>,
}

impl GrantQuery {
    /// Whether `grant` passes the filters.
    pub fn matches(&self, grant: &Grant) -> bool {
        self.agent.as_ref().is_none_or(|a| &grant.agent == a)
            && self.tool.as_ref().is_none_or(|t| &grant.tool == t)
            && self.active_at.is_none_or(|now| grant.is_active(now))
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// What an audit row of a call a grant let through names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRef {
    /// The grant's id.
    pub id: String,
    /// Who granted it.
    pub granted_by: String,
}

#[cfg(test)]
mod tests;
