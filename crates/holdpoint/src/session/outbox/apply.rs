//! How a settle or an operator's retry moves a row, for store
//! implementations.

use chrono::{DateTime, Utc};

use super::event::{OutboxEvent, OutboxOutcome, OutboxState};

/// Applies `outcome` to a claimed row in place, for store implementations
/// (the store checked the claim's token first).
pub fn apply_outcome(event: &mut OutboxEvent, outcome: OutboxOutcome) {
    event.lease_until = None;
    match outcome {
        OutboxOutcome::Delivered { done } => {
            event.state = OutboxState::Delivered;
            event.done = done;
        }
        OutboxOutcome::Retry {
            due_at,
            error,
            done,
            counted,
        } => {
            event.state = OutboxState::Pending;
            event.due_at = due_at;
            if error.is_some() {
                event.last_error = error;
            }
            event.done = done;
            if !counted {
                event.attempts = event.attempts.saturating_sub(1);
            }
        }
        OutboxOutcome::Dead { error, done } => {
            event.state = OutboxState::Dead;
            event.last_error = Some(error);
            event.done = done;
        }
        OutboxOutcome::Cancelled { reason } => {
            event.state = OutboxState::Cancelled;
            event.last_error = Some(reason);
        }
    }
}

/// Makes a dead (or any) row pending again, due now, with its attempts
/// reset: what an operator's retry does. The channels it reached stay
/// reached, except those among `stopped` (endpoints stopped for good by a
/// 410, [`EndpointStop`](super::EndpointStop)): a retry re-enables them
/// and sends to them again. Returns the channels it re-enables, whose stop
/// the store deletes in the same transaction.
pub fn apply_retry(event: &mut OutboxEvent, now: DateTime<Utc>, stopped: &[String]) -> Vec<String> {
    event.state = OutboxState::Pending;
    event.due_at = now;
    event.attempts = 0;
    event.lease_until = None;
    let enabled: Vec<String> = event.done.iter().filter(|d| stopped.contains(d)).cloned().collect();
    event.done.retain(|d| !enabled.contains(d));
    enabled
}

/// One settle of a batch ([`OutboxStore::settle_outbox_batch`](crate::session::OutboxStore::settle_outbox_batch)):
/// the claimed row, the claim's token and how its attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxSettle {
    /// The row's id.
    pub id: String,
    /// The claim's token.
    pub token: String,
    /// How the attempt ended.
    pub outcome: OutboxOutcome,
}

/// The refusal of a settle whose claim is no longer the row's
/// (`FAILED_PRECONDITION`), for store implementations.
pub fn lease_lost(id: &str) -> crate::error::Error {
    crate::error::Error::FailedPrecondition(format!(
        "outbox event {id} is no longer claimed by this worker (its lease lapsed and another claimed it)"
    ))
}
