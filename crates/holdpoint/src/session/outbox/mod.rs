//! The outbox of hold events (docs/reference.md §11.3): rows a store writes
//! in the same transaction as the change they report, and the timers
//! (remind, escalate, expire, in doubt) kept in the same table.
//!
//! A store writes [`hold_events`] with every save that makes a snapshot
//! wait for an answer, and [`decided_events`] with every resume claim
//! (which carries the decisions' audit records). A delivery worker
//! (`holdpoint-notify`) then claims due rows with a lease
//! ([`OutboxStore::claim_outbox`](super::OutboxStore::claim_outbox)), so
//! each row is in flight in one process at a time, and settles them
//! ([`OutboxStore::settle_outbox`](super::OutboxStore::settle_outbox)).
//!
//! A store may keep a row as its kind, ids and due time only and build
//! its payload when the row is claimed or listed: [`hold_stubs`] and
//! [`call_payload`] for a hold's rows (from the held snapshot: a claim does
//! not change what it reads; before a rewrite in place, an escalation's,
//! the store builds the payloads of the row's events), [`decision_payload`]
//! for a claim's (from its audit records). The payload is the one the
//! whole row would have carried.
//!
//! | module | what |
//! |---|---|
//! | `event` | the row ([`OutboxEvent`]), its claim, outcome and listing query |
//! | `timers` | what a rule's timers write into a hold ([`HoldTimers`], [`OnExpire`]) |
//! | `events` | the rows a store writes with a hold, and their payload |
//! | `decided` | the rows a store writes with a claim or a partial approval |
//! | `writes` | which rows a store writes ([`OutboxWrites`]) |
//! | `apply` | how a settle, a retry or a batch of settles moves rows |
//! | `endpoint` | endpoints stopped for good (HTTP 410), kept in the store |
//! | `escalate` | what an escalation records on the hold: the roles it adds |
//! | `summary` | a hold in words: the one line the inbox and notifications show |

mod apply;
mod decided;
mod endpoint;
mod escalate;
mod event;
mod events;
mod summary;
#[cfg(test)]
mod tests;
mod timers;
mod writes;

pub use apply::{OutboxSettle, apply_outcome, apply_retry, lease_lost};
pub use decided::{Decisions, decided_events, decision_payload, partial_approval_event};
pub use endpoint::{EndpointStop, OutboxStats};
pub use escalate::{ESCALATED_TO, escalated_hold};
pub use event::{OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxState};
pub use events::{call_payload, hold_events, hold_stubs};
pub use summary::{group_thousands, hold_summary, is_amount_key, readable_input};
pub use timers::{HoldTimers, OnExpire};
pub use writes::OutboxWrites;

/// `hold.created`: a call was held and waits for an answer.
pub const HOLD_CREATED: &str = "hold.created";
/// `hold.decided`: a hold was answered (approve, deny, respond, …).
pub const HOLD_DECIDED: &str = "hold.decided";
/// `hold.expired`: a hold reached its expiry unanswered.
pub const HOLD_EXPIRED: &str = "hold.expired";
/// `hold.escalated`: a hold stayed unanswered past `escalate_after`; more
/// roles may answer it.
pub const HOLD_ESCALATED: &str = "hold.escalated";
/// `hold.reminded`: a hold stayed unanswered past `remind_after`.
pub const HOLD_REMINDED: &str = "hold.reminded";
/// `hold.in_doubt`: the resume that claimed a hold stopped renewing its
/// lease with nothing written after it (docs/reference.md §8.2).
pub const HOLD_IN_DOUBT: &str = "hold.in_doubt";
/// `hold.partially_approved`: an approval was recorded that does not yet
/// complete the hold's quorum.
pub const HOLD_PARTIALLY_APPROVED: &str = "hold.partially_approved";

/// Every event type, in the order listings show them.
pub const EVENT_TYPES: &[&str] = &[
    HOLD_CREATED,
    HOLD_PARTIALLY_APPROVED,
    HOLD_DECIDED,
    HOLD_REMINDED,
    HOLD_ESCALATED,
    HOLD_EXPIRED,
    HOLD_IN_DOUBT,
];

/// Interrupt-data key: when to remind the approvers (RFC 3339).
pub const REMIND_AT: &str = "remindAt";
/// Interrupt-data key: when to escalate (RFC 3339).
pub const ESCALATE_AT: &str = "escalateAt";
/// Interrupt-data key: the roles an escalation adds (array of strings).
pub const ESCALATE_TO: &str = "escalateTo";
/// Interrupt-data key: what expiry does, `"deny"` or `"expire"`.
pub const ON_EXPIRE: &str = "onExpire";
/// Interrupt-data key: the roles that may answer (array of strings).
pub const APPROVERS: &str = "approvers";
