//! A rule's timers as a hold's interrupt data: the deadlines the store
//! turns into timer rows when it writes the hold.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ESCALATE_AT, ESCALATE_TO, ON_EXPIRE, REMIND_AT};
use crate::message::metadata;
use crate::session::snapshot::lease_end;

/// What expiry does to an unanswered hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExpire {
    /// The hold stays, read as expired: an answer after it is refused as
    /// expired; only `hold.expired` is sent.
    #[default]
    Expire,
    /// The held call is denied (the model is told it expired; the audit
    /// records `expire`), then `hold.expired` is sent.
    Deny,
}

impl OnExpire {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExpire::Expire => "expire",
            OnExpire::Deny => "deny",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "expire" => Some(OnExpire::Expire),
            "deny" => Some(OnExpire::Deny),
            _ => None,
        }
    }
}

/// The timers of an approval rule (`remind_after`, `escalate_after` +
/// `escalate_to`, `expire_after` + `on_expire`): what the configuration
/// converts into. [`HoldTimers::stamp`] writes them into a hold's interrupt
/// data as deadlines, which the store turns into timer rows when it writes
/// the hold ([`hold_events`](super::hold_events)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HoldTimers {
    /// Notify the same approvers again after this long.
    pub remind_after: Option<Duration>,
    /// Escalate after this long.
    pub escalate_after: Option<Duration>,
    /// The roles an escalation lets answer (and notifies).
    pub escalate_to: Vec<String>,
    /// The hold expires after this long.
    pub expire_after: Option<Duration>,
    /// What expiry does.
    pub on_expire: OnExpire,
}

impl HoldTimers {
    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.remind_after.is_none() && self.escalate_after.is_none() && self.expire_after.is_none()
    }

    /// Writes the deadlines, counted from `now`, into `data` (a hold's
    /// interrupt data): [`REMIND_AT`], [`ESCALATE_AT`] with
    /// [`ESCALATE_TO`], and `expiresAt` with [`ON_EXPIRE`]. An expiry
    /// already in `data` that is earlier is kept.
    pub fn stamp(&self, data: &mut Map<String, Value>, now: DateTime<Utc>) {
        let at = |d: Duration| Value::String(rfc3339(lease_end(now, d)));
        if let Some(d) = self.remind_after {
            data.insert(REMIND_AT.into(), at(d));
        }
        if let Some(d) = self.escalate_after {
            data.insert(ESCALATE_AT.into(), at(d));
            data.insert(
                ESCALATE_TO.into(),
                Value::Array(self.escalate_to.iter().cloned().map(Value::String).collect()),
            );
        }
        if let Some(d) = self.expire_after {
            let ours = lease_end(now, d);
            let earlier = data
                .get(metadata::EXPIRES_AT)
                .and_then(Value::as_str)
                .and_then(parse_time)
                .is_some_and(|t| t <= ours);
            if !earlier {
                data.insert(metadata::EXPIRES_AT.into(), Value::String(rfc3339(ours)));
            }
            data.insert(ON_EXPIRE.into(), Value::String(self.on_expire.as_str().into()));
        }
    }
}

/// A time as the outbox's JSON writes it (RFC 3339, milliseconds, `Z`).
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time the outbox's JSON wrote, if it is RFC 3339.
pub(crate) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}
