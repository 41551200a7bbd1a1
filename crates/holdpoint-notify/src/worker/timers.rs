//! Due timers: each is checked against its hold first (an answered hold
//! cancels it), then its action runs — an expiry that denies, an
//! escalation that adds answering roles — before it is delivered.

use chrono::Utc;
use holdpoint::session::OnExpire;
use holdpoint::session::OutboxEvent;
use holdpoint::session::outbox::{ESCALATE_TO, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT, ON_EXPIRE};

use super::{TARGET, Worker};
use crate::actions::{ExpireOutcome, HoldRef};

/// What a due timer leads to.
pub(super) enum Fire {
    /// Deliver it.
    Go,
    /// Not to be delivered.
    Cancel(String),
    /// Not yet: check again then (an in-doubt check whose lease was renewed).
    Postpone(chrono::DateTime<Utc>),
    /// Its action failed: retry.
    Failed(String),
}

impl Worker {
    /// Checks a due timer against its hold and runs its action.
    pub(super) async fn fire(&self, event: &OutboxEvent) -> Fire {
        let row = match self.store.get_snapshot(&event.snapshot_id).await {
            Ok(Some(row)) => row,
            Ok(None) => return Fire::Cancel("the snapshot is gone".into()),
            Err(e) => return Fire::Failed(format!("reading the hold failed: {e}")),
        };
        let now = Utc::now();
        if event.kind == HOLD_IN_DOUBT {
            if let Some(end) = row.resume_lease_end()
                && end > now
            {
                return Fire::Postpone(end);
            }
            if !row.resume_lapsed(now) {
                return Fire::Cancel("the resume was not left in doubt".into());
            }
            return match self.store.get_latest_snapshot(&row.session_id).await {
                Ok(Some(latest))
                    if latest.snapshot_id != row.snapshot_id
                        && !latest.is_unfinished_successor_of(&row.snapshot_id) =>
                {
                    Fire::Cancel("the resume wrote its outcome".into())
                }
                Ok(_) => Fire::Go,
                Err(e) => Fire::Failed(format!("reading the session failed: {e}")),
            };
        }
        if !row.is_waiting() {
            return Fire::Cancel("the hold was answered".into());
        }
        let hold = HoldRef {
            agent: event.agent.clone(),
            session_id: event.session_id.clone(),
            snapshot_id: event.snapshot_id.clone(),
            reference: event.reference().map(str::to_owned),
            tool: event
                .data
                .get("tool")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_owned(),
        };
        let on_expire = event
            .data
            .get(ON_EXPIRE)
            .and_then(|v| v.as_str())
            .and_then(OnExpire::parse)
            .unwrap_or_default();
        match (event.kind.as_str(), &self.actions) {
            (HOLD_EXPIRED, Some(actions)) if on_expire == OnExpire::Deny => match actions.expire(&hold).await {
                Ok(ExpireOutcome::Denied) => Fire::Go,
                Ok(ExpireOutcome::AlreadyAnswered) => Fire::Cancel("the hold was answered".into()),
                Err(e) => Fire::Failed(format!("denying the expired hold failed: {e}")),
            },
            (HOLD_EXPIRED, None) if on_expire == OnExpire::Deny => {
                tracing::warn!(target: TARGET, "no HoldActions: the expired hold is only notified, not denied");
                Fire::Go
            }
            (HOLD_ESCALATED, Some(actions)) => {
                let roles: Vec<String> = event
                    .data
                    .get(ESCALATE_TO)
                    .and_then(|v| v.as_array())
                    .map(|a| a.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                match actions.escalate(&hold, &roles).await {
                    Ok(()) => Fire::Go,
                    Err(e) => Fire::Failed(format!("escalating failed: {e}")),
                }
            }
            _ => Fire::Go,
        }
    }
}
