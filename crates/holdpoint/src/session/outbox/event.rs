//! The outbox row, its claim, how an attempt ends, and the operators' query.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::APPROVERS;

/// Where an outbox row is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxState {
    /// Not yet delivered: due at `dueAt` (later for retries and timers).
    Pending,
    /// Delivered to every channel that serves it (at least one).
    Delivered,
    /// Gave up after the last attempt (or a permanent refusal).
    Dead,
    /// Not to be delivered: a timer whose hold was answered first, or an
    /// event no channel takes (sent nowhere; `lastError` says why).
    Cancelled,
}

impl OutboxState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Delivered => "delivered",
            OutboxState::Dead => "dead",
            OutboxState::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => OutboxState::Pending,
            "delivered" => OutboxState::Delivered,
            "dead" => OutboxState::Dead,
            "cancelled" => OutboxState::Cancelled,
            _ => return None,
        })
    }
}

/// One outbox row: an event to deliver, or a timer that becomes one when
/// it falls due.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxEvent {
    /// Its id: the idempotency key every delivery of it carries (the
    /// webhook's `webhook-id`).
    pub id: String,
    /// The event type ([`HOLD_CREATED`](super::HOLD_CREATED), …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether this is a timer: when due, the worker first checks that the
    /// hold still waits (else the row is cancelled).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timer: bool,
    /// The snapshot that holds the call.
    pub snapshot_id: String,
    /// Its session.
    pub session_id: String,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The payload's `data` (without `url`, which the deliverer adds).
    pub data: Value,
    /// When the row was written.
    pub created_at: DateTime<Utc>,
    /// When it is due (next attempt, or the timer's deadline).
    pub due_at: DateTime<Utc>,
    /// Where it is in its life.
    pub state: OutboxState,
    /// How many deliveries were started (counted when claimed).
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed (never a secret: deliverers redact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Until when the current claim holds it (`None`: unclaimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<DateTime<Utc>>,
    /// The channels it was delivered to (or that refused it for good), so
    /// a retry sends only to the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<String>,
}

impl OutboxEvent {
    /// A pending event of `kind` about `snapshot_id`, due at `due_at`.
    pub fn new(
        kind: &str,
        snapshot_id: &str,
        session_id: &str,
        agent: Option<&str>,
        data: Value,
        due_at: DateTime<Utc>,
    ) -> Self {
        let now = Utc::now();
        OutboxEvent {
            id: format!(
                "msg_{}",
                uuid::Uuid::new_v7(uuid::Timestamp::now(uuid::NoContext)).simple()
            ),
            kind: kind.to_owned(),
            timer: false,
            snapshot_id: snapshot_id.to_owned(),
            session_id: session_id.to_owned(),
            agent: agent.map(str::to_owned),
            data,
            created_at: now,
            due_at,
            state: OutboxState::Pending,
            attempts: 0,
            last_error: None,
            lease_until: None,
            done: Vec::new(),
        }
    }

    /// Makes this row a timer.
    pub fn as_timer(mut self) -> Self {
        self.timer = true;
        self
    }

    /// The call's ref, from the data.
    pub fn reference(&self) -> Option<&str> {
        self.data.get("ref").and_then(Value::as_str)
    }

    /// The roles the data names as approvers.
    pub fn approvers(&self) -> Vec<&str> {
        self.data
            .get(APPROVERS)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether it is claimable at `now`: pending, due, and not leased.
    pub fn claimable(&self, now: DateTime<Utc>) -> bool {
        self.state == OutboxState::Pending && self.due_at <= now && self.lease_until.is_none_or(|l| l <= now)
    }
}

/// A claimed outbox row and the token that proves the claim: settling it
/// needs the token, so a worker whose lease lapsed (and whose row another
/// took) cannot settle the other's claim.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxLease {
    /// The row as claimed (`attempts` already counts this attempt).
    pub event: OutboxEvent,
    /// The claim's token.
    pub token: String,
}

/// How a claimed row ends its attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum OutboxOutcome {
    /// Delivered to every channel that serves it, at least one: the row
    /// is done.
    Delivered {
        /// The channels it reached.
        done: Vec<String>,
    },
    /// Try again at `due_at` (a retry after a failure, or a timer pushed
    /// back, e.g. an in-doubt check whose lease was renewed).
    Retry {
        /// When to try again.
        due_at: DateTime<Utc>,
        /// Why (absent for a postponed timer).
        error: Option<String>,
        /// The channels reached so far.
        done: Vec<String>,
        /// Whether this attempt counts against the limit (a postponed
        /// timer's does not).
        counted: bool,
    },
    /// Give up: the row is dead.
    Dead {
        /// Why.
        error: String,
        /// The channels reached before.
        done: Vec<String>,
    },
    /// Not to be delivered (a timer whose hold was answered, or an event
    /// no channel takes).
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// Which outbox rows to list (filters combine; oldest due first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxQuery {
    /// Only rows in this state.
    pub state: Option<OutboxState>,
    /// Only this snapshot's.
    pub snapshot_id: Option<String>,
    /// At most this many (default 100).
    pub limit: Option<usize>,
    /// Skip this many matching rows first (paging; default 0).
    pub offset: Option<usize>,
    /// Only rows that failed before (a `lastError` is recorded): with
    /// `state` pending, the rows waiting for a retry.
    pub retrying: bool,
}

impl OutboxQuery {
    /// Whether `event` passes the filters.
    pub fn matches(&self, event: &OutboxEvent) -> bool {
        self.state.is_none_or(|s| event.state == s)
            && self.snapshot_id.as_ref().is_none_or(|s| &event.snapshot_id == s)
            && (!self.retrying || event.last_error.is_some())
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }

    /// The effective offset.
    pub fn offset(&self) -> usize {
        self.offset.unwrap_or(0)
    }
}
