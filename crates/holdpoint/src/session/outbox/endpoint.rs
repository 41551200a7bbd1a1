//! Endpoints stopped for good, and the outbox's counts for a metrics
//! scrape.
//!
//! An endpoint that answers HTTP 410 gets nothing more: the worker records
//! an [`EndpointStop`] in the store, so every replica and a restart agree,
//! until an operator re-enables it (an explicit command, or a retry of a
//! row that skipped it).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A stopped endpoint (docs/reference.md §11.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStop {
    /// The channel's id (`webhook:0`, `slack:1`).
    pub channel: String,
    /// A fingerprint of the endpoint's address (a hash, never the URL,
    /// which may hold a token): a stop applies only while the channel
    /// still points at the endpoint that refused.
    pub fingerprint: String,
    /// Why (the refusal, never a secret).
    pub reason: String,
    /// When it stopped.
    pub stopped_at: DateTime<Utc>,
}

/// How many outbox rows wait, and how long the oldest due one has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxStats {
    /// Pending rows due now (first attempts and retries).
    pub due: u64,
    /// Of those and the later ones, rows that failed at least once and
    /// wait for another attempt.
    pub retrying: u64,
    /// Rows given up on.
    pub dead: u64,
    /// The earliest `dueAt` among the pending rows due now (`None`: none
    /// is due): the queue's age is `now` minus it.
    pub oldest_due: Option<DateTime<Utc>>,
}

impl OutboxStats {
    /// The counts of `rows` at `now`, for stores that count in memory.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a super::OutboxEvent>, now: DateTime<Utc>) -> Self {
        let mut stats = OutboxStats::default();
        for row in rows {
            match row.state {
                super::OutboxState::Pending => {
                    if row.attempts > 0 {
                        stats.retrying += 1;
                    }
                    if row.due_at <= now {
                        stats.due += 1;
                        stats.oldest_due = Some(stats.oldest_due.map_or(row.due_at, |o| o.min(row.due_at)));
                    }
                }
                super::OutboxState::Dead => stats.dead += 1,
                _ => {}
            }
        }
        stats
    }
}
