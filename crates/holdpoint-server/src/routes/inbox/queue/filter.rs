//! The queue's filters: which holds of those the caller may see a query
//! keeps.

use chrono::{DateTime, Utc};
use holdpoint::agent::PendingApproval;
use holdpoint::session::outbox::{ESCALATED_TO, is_amount_key};
use serde_json::Value;

use super::InboxQuery;

impl InboxQuery {
    /// Whether every filter of the query keeps `call` (`for_me` and
    /// `partial` as the item reports them; ages as of `now`). An empty
    /// string filter keeps everything.
    pub(super) fn keeps(&self, call: &PendingApproval, for_me: bool, partial: bool, now: DateTime<Utc>) -> bool {
        let waited = (now - call.held_since).num_seconds();
        let amount = amount_of(call, self.amount_field.as_deref());
        let in_range =
            |bound: Option<f64>, ok: fn(f64, f64) -> bool| bound.is_none_or(|b| amount.is_some_and(|a| ok(a, b)));
        self.tool.as_deref().is_none_or(|t| t.is_empty() || t == call.tool)
            && self.role.as_deref().is_none_or(|r| {
                r.is_empty()
                    || call
                        .rule
                        .as_ref()
                        .is_some_and(|rule| rule.approvers.iter().any(|a| a == r))
            })
            && self.expired.is_none_or(|e| e == call.expired)
            && self.mine.is_none_or(|m| m == for_me)
            && self.partial.is_none_or(|p| p == partial)
            && self
                .requester
                .as_deref()
                .is_none_or(|r| r.is_empty() || call.owner.as_deref() == Some(r))
            && self
                .rule
                .as_deref()
                .is_none_or(|r| r.is_empty() || call.rule.as_ref().is_some_and(|rule| rule.rule == r))
            && self.escalated.is_none_or(|e| e == escalated(call))
            && in_range(self.min_amount, |a, b| a >= b)
            && in_range(self.max_amount, |a, b| a <= b)
            && self.min_age.is_none_or(|m| waited >= m)
            && self.max_age.is_none_or(|m| waited <= m)
    }
}

/// The amount of a hold `min`/`max` bound: the named numeric field, or the
/// largest of the fields whose names say money.
fn amount_of(call: &PendingApproval, field: Option<&str>) -> Option<f64> {
    let map = call.input.as_object()?;
    match field.filter(|f| !f.is_empty()) {
        Some(f) => map.get(f).and_then(Value::as_f64),
        None => map
            .iter()
            .filter(|(k, _)| is_amount_key(k))
            .filter_map(|(_, v)| v.as_f64())
            .reduce(f64::max),
    }
}

/// Whether an escalation widened the hold (interrupt `escalatedTo`).
fn escalated(call: &PendingApproval) -> bool {
    call.interrupt
        .get(ESCALATED_TO)
        .and_then(Value::as_array)
        .is_some_and(|to| !to.is_empty())
}
