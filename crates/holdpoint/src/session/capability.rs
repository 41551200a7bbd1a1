//! The capability traits of a session store — a listing, an audit trail,
//! standing grants, an outbox, pruning — and [`Capabilities`], the handles
//! a store hands out through
//! [`SessionStore::capabilities`](super::SessionStore::capabilities).
//!
//! Invariant: a store implements a capability whole or not at all. Every
//! method here is required (no default that could hide a gap in a
//! decorator), and a store says which traits it has once, in
//! `capabilities`; what needs one (an agent with an approval policy, the
//! server's routes, the notification worker, a prune) asks when it is
//! built and refuses a store without it ([`Error::MissingCapability`]).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::audit::AuditRecord;
use super::outbox::{EndpointStop, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxStats};
use super::prune::{PruneOutcome, PruneRequest};
use super::query::{AuditQuery, SnapshotQuery};
use super::snapshot::{Snapshot, SnapshotUpdate};
use crate::error::{Error, Result};
use crate::hold::{Grant, GrantQuery};

/// Listing snapshots across sessions: the pending inbox, operators' views.
#[async_trait]
pub trait SnapshotListing: Send + Sync {
    /// Snapshots matching `query`, newest first (see [`SnapshotQuery`];
    /// `waiting_only` keeps only the latest snapshot of each session, and
    /// only when it is waiting for an answer).
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>>;

    /// How many sessions wait for an answer — those `list_snapshots` lists
    /// with `waiting_only`, of `agent` when given — and when the oldest of
    /// their waiting snapshots was written: what a metrics scrape can
    /// afford to run (a count from an index, not a listing).
    /// [`WaitingCount::of`] a listing is a correct body.
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount>;
}

/// An audit trail of decisions, and the row write that appends to it
/// atomically.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends audit records.
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()>;

    /// Audit records matching `query`, newest first.
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>>;

    /// [`save_snapshot`](super::SessionStore::save_snapshot) of row
    /// `snapshot_id` that also appends `audit` when `update` writes a row —
    /// in one transaction, so the row and its records are written together
    /// or not at all; nothing is appended when `update` writes nothing or
    /// fails. A partial approval of a hold is written this way
    /// (docs/reference.md §10.7).
    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>>;
}

/// Standing grants (docs/reference.md §10.9).
#[async_trait]
pub trait GrantStore: Send + Sync {
    /// Stores a new standing grant; [`Error::AlreadyExists`] when a grant
    /// has its id.
    async fn insert_grant(&self, grant: Grant) -> Result<()>;

    /// The grant with this id (revoked, expired and used-up ones too).
    async fn get_grant(&self, id: &str) -> Result<Option<Grant>>;

    /// Grants matching `query`, newest first, read from the store itself
    /// on every call (no process cache), so a revoke is seen at once by
    /// every handle and process.
    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>>;

    /// Spends one use of grant `id` at `now` ([`Grant::used_once`]) by a
    /// compare-and-set under the store's lock, and appends `audit` in the
    /// same step: the grant after the use, or `None` (nothing written) when
    /// it is missing, revoked, expired or used up — so two processes never
    /// both spend its last use.
    async fn use_grant(&self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Result<Option<Grant>>;

    /// Revokes grant `id` ([`Grant::revoked`]): the grant as revoked, or
    /// `None` when there is no such grant; a grant revoked before is
    /// returned as it was.
    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>>;
}

/// The notification outbox (docs/reference.md §11.3): rows written with
/// the snapshot changes that raise them, claimed and settled by workers.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims up to `limit` outbox rows due at `now` (pending, `dueAt` not
    /// after `now`, not leased), oldest due first, leasing each until
    /// `now + lease` and counting an attempt. A row is claimed by one
    /// caller at a time, across handles and processes; a lease that lapsed
    /// (its worker died) lets the row be claimed again.
    async fn claim_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>>;

    /// Ends the attempt of a claimed row: delivered, retry later (the
    /// backoff), dead, or cancelled. `FAILED_PRECONDITION` (nothing
    /// changed) when `token` is not the row's current claim (its lease
    /// lapsed and another worker claimed it); `NOT_FOUND` for no such row.
    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()>;

    /// Ends the attempts of a batch of claimed rows, each as
    /// [`settle_outbox`](Self::settle_outbox) would, in one store round
    /// trip where the store can (one transaction); the answer has one
    /// result per settle, in order (a lost lease fails only its own).
    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>>;

    /// The outbox's counts at `now` (for a metrics scrape): rows due,
    /// retrying and dead, and the earliest due time.
    async fn outbox_stats(&self, now: DateTime<Utc>) -> Result<OutboxStats>;

    /// Records that an endpoint refused for good (HTTP 410): it gets
    /// nothing more until [`enable_endpoint`](Self::enable_endpoint) or a
    /// [`retry_outbox`](Self::retry_outbox) of a row that skipped it. A
    /// second stop of one channel replaces the first.
    async fn stop_endpoint(&self, stop: EndpointStop) -> Result<()>;

    /// The stopped endpoints, by channel id.
    async fn stopped_endpoints(&self) -> Result<Vec<EndpointStop>>;

    /// Re-enables the stopped endpoint of `channel`; whether it was
    /// stopped.
    async fn enable_endpoint(&self, channel: &str) -> Result<bool>;

    /// Writes outbox rows on their own (not with a snapshot change): the
    /// events a worker derives when a timer fires, and what an operator
    /// queues by hand.
    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()>;

    /// Outbox rows matching `query`, oldest due first (for operators).
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>>;

    /// Makes row `id` pending again, due now, its attempts reset (an
    /// operator's retry of a dead row), and re-enables the stopped
    /// endpoints it skipped, which it goes to again
    /// ([`apply_retry`](super::outbox::apply_retry)), in one transaction;
    /// returns it, or `None` when there is no such row.
    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>>;
}

/// Deleting old sessions (docs/reference.md §11.4).
#[async_trait]
pub trait PruneStore: Send + Sync {
    /// One step of a prune: examines up to `request.batch` sessions after
    /// `request.after`, in session-id order, and deletes every snapshot of
    /// each one whose latest snapshot is [`prunable`](super::prunable) —
    /// and, with `request.audit`, its audit records — in one transaction.
    /// A session waiting at a hold, running, in doubt, or changed since
    /// `older_than` is kept whole; a snapshot written while the step runs
    /// is never deleted.
    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome>;
}

/// What [`SnapshotListing::count_waiting`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitingCount {
    /// How many sessions wait for an answer.
    pub count: u64,
    /// When the oldest of their waiting snapshots was written (`None` when
    /// none waits).
    pub oldest: Option<DateTime<Utc>>,
}

impl WaitingCount {
    /// The count of `waiting` (the latest, waiting snapshot of each
    /// session, as `waiting_only` lists them).
    pub fn of<'a>(waiting: impl IntoIterator<Item = &'a Snapshot>) -> Self {
        waiting
            .into_iter()
            .fold(WaitingCount::default(), |acc, s| WaitingCount {
                count: acc.count + 1,
                oldest: Some(acc.oldest.map_or(s.created_at, |o| o.min(s.created_at))),
            })
    }
}

/// The capability handles of one store (each `None` when it lacks it).
///
/// A decorator (metrics, tracing, counting) wraps the handles of the store
/// it decorates and hands out its own, so it has exactly the capabilities
/// of what it wraps. The accessors fail with [`Error::MissingCapability`].
#[derive(Clone, Default)]
pub struct Capabilities {
    /// Listing snapshots across sessions.
    pub listing: Option<Arc<dyn SnapshotListing>>,
    /// The audit trail.
    pub audit: Option<Arc<dyn AuditStore>>,
    /// Standing grants.
    pub grants: Option<Arc<dyn GrantStore>>,
    /// The notification outbox.
    pub outbox: Option<Arc<dyn OutboxStore>>,
    /// Pruning old sessions.
    pub prune: Option<Arc<dyn PruneStore>>,
}

impl Capabilities {
    /// Every capability, each a handle on `store`.
    pub fn all<S>(store: Arc<S>) -> Self
    where
        S: SnapshotListing + AuditStore + GrantStore + OutboxStore + PruneStore + 'static,
    {
        Capabilities {
            listing: Some(store.clone()),
            audit: Some(store.clone()),
            grants: Some(store.clone()),
            outbox: Some(store.clone()),
            prune: Some(store),
        }
    }

    /// The listing, or [`Error::MissingCapability`].
    pub fn listing(&self) -> Result<&Arc<dyn SnapshotListing>> {
        self.listing.as_ref().ok_or_else(|| missing("listing"))
    }

    /// The audit trail, or [`Error::MissingCapability`].
    pub fn audit(&self) -> Result<&Arc<dyn AuditStore>> {
        self.audit.as_ref().ok_or_else(|| missing("audit"))
    }

    /// The grants, or [`Error::MissingCapability`].
    pub fn grants(&self) -> Result<&Arc<dyn GrantStore>> {
        self.grants.as_ref().ok_or_else(|| missing("grants"))
    }

    /// The outbox, or [`Error::MissingCapability`].
    pub fn outbox(&self) -> Result<&Arc<dyn OutboxStore>> {
        self.outbox.as_ref().ok_or_else(|| missing("outbox"))
    }

    /// Pruning, or [`Error::MissingCapability`].
    pub fn prune(&self) -> Result<&Arc<dyn PruneStore>> {
        self.prune.as_ref().ok_or_else(|| missing("prune"))
    }

    /// The names of the capabilities present, in a fixed order.
    pub fn names(&self) -> Vec<&'static str> {
        [
            ("listing", self.listing.is_some()),
            ("audit", self.audit.is_some()),
            ("grants", self.grants.is_some()),
            ("outbox", self.outbox.is_some()),
            ("prune", self.prune.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, has)| has.then_some(name))
        .collect()
    }
}

/// Names `needed_by` in a [`Error::MissingCapability`] of `result`.
pub fn needed_by<T>(result: Result<T>, who: impl Into<String>) -> Result<T> {
    result.map_err(|e| match e {
        Error::MissingCapability { capability, .. } => Error::MissingCapability {
            capability,
            needed_by: who.into(),
        },
        other => other,
    })
}

fn missing(capability: &'static str) -> Error {
    Error::MissingCapability {
        capability,
        needed_by: "this call".into(),
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
