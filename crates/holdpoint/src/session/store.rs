//! The `SessionStore` trait: where server-managed agents keep snapshots.
//! The rules its implementations share live beside it: the claim and lease
//! of a resume (`claim`), the checks of a written row (`write`), the
//! reference listing (`listing`) and the query types (`query`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;

use super::audit::AuditRecord;
use super::claim::{ResumeClaim, claim_update};
use super::outbox::{EndpointStop, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxStats};
use super::prune::{PruneOutcome, PruneRequest};
use super::query::{AuditQuery, SnapshotQuery};
use super::snapshot::{Snapshot, SnapshotStatus, SnapshotUpdate};
use super::write::insert_update;
use crate::error::{Error, Result};
use crate::hold::{Grant, GrantQuery};

/// A store of session snapshots.
///
/// Implementations must make [`save_snapshot`](Self::save_snapshot) atomic
/// (two concurrent saves of one id never both see the same old row), keep
/// the session id of an existing row, return copies rather than aliases,
/// and report status changes to [`watch_status`](Self::watch_status)
/// subscribers. The `holdpoint-testkit` store suite checks all of it.
///
/// An agent takes a store with [`AgentBuilder::store`](crate::agent::AgentBuilder::store)
/// (here [`InMemoryStore`](super::InMemoryStore); `SqliteStore` and
/// `PostgresStore` live in their own crates, and `holdpoint_stores::open_store(url)`
/// opens any of them). Reading it directly is for tools of your own;
/// the agent's methods (`pending`, `snapshot`, `audit`) add the access checks.
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::prelude::*;
/// use holdpoint::session::SnapshotStatus;
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> holdpoint::Result<()> {
/// let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
/// let model = ScriptedModel::new("scripted");
/// model.push(ScriptedTurn::tool_call("closeAccount", json!({"account": "savings"})));
/// let close = DynamicTool::new("closeAccount", "Closes an account", json!({"type": "object"}), |_ctx, _input| async move {
///     Ok(json!({"closed": true}))
/// });
/// let agent = Agent::builder("bankingAgent")
///     .model(Arc::new(model))
///     .tool(close)
///     .middleware(ToolApproval::allow(["getBalance"]).into_middleware())
///     .store(Arc::clone(&store))
///     .build()?;
/// let held = agent.run_text("close my savings account").await?;
///
/// // The paused turn is a row of the store: the session's latest snapshot, waiting.
/// let row = store.get_latest_snapshot(&held.session_id).await?.expect("saved");
/// assert_eq!(Some(&row.snapshot_id), held.snapshot_id.as_ref());
/// assert_eq!(row.status, SnapshotStatus::Completed); // the turn finished, interrupted
/// assert!(row.is_waiting());
/// let waiting = store
///     .list_snapshots(&SnapshotQuery { waiting_only: true, ..SnapshotQuery::default() })
///     .await?;
/// assert_eq!(waiting.len(), 1);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The snapshot with this id, with its status as read now
    /// (see [`Snapshot::as_read`]).
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>>;

    /// The session's snapshot with the greatest `createdAt` (any status);
    /// ties go to the greatest snapshot id.
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>>;

    /// Atomic read-modify-write of one row. With `snapshot_id` `None` (or
    /// empty) the store mints a fresh id and `update` gets `None`. Returns
    /// the row written, or `None` when `update` chose to write nothing.
    ///
    /// The written row keeps the caller's timestamps; its `snapshotId` is
    /// the saved id; a row without a session id is an error; the session id
    /// of an existing row never changes.
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>>;

    /// The row's status now, then each change (changes may be coalesced).
    /// The stream ends when the row does not exist, and stops when dropped.
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>>;

    /// Snapshots matching `query`, newest first (see [`SnapshotQuery`];
    /// `waiting_only` keeps only the latest snapshot of each session, and
    /// only when it is waiting for an answer).
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        let _ = query;
        Err(unsupported("list snapshots"))
    }

    /// Appends audit records.
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        Err(unsupported("keep an audit trail"))
    }

    /// Audit records matching `query`, newest first.
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let _ = query;
        Err(unsupported("keep an audit trail"))
    }

    /// The exactly-once guard of a resume (docs/reference.md §7): applies
    /// [`claim_update`] to the claimed snapshot (failing with `ABORTED`,
    /// "already resumed", when it was) and appends `audit` — in one
    /// transaction in durable stores. The default claims through
    /// [`save_snapshot`](Self::save_snapshot) and then appends; stores
    /// override it to make both one atomic step.
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let id = claim.snapshot_id.clone();
        self.save_snapshot(Some(&id), claim_update(claim)).await?;
        self.append_audit(audit).await
    }

    /// [`save_snapshot`](Self::save_snapshot) of row `snapshot_id` that
    /// also appends `audit` when `update` writes a row — in one transaction
    /// in durable stores, so the row and its records are written together
    /// or not at all; nothing is appended when `update` writes nothing or
    /// fails. A partial approval of a hold is written this way
    /// (docs/reference.md §10.7). The default saves and then appends.
    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        let saved = self.save_snapshot(Some(snapshot_id), update).await?;
        if saved.is_some() {
            self.append_audit(audit).await?;
        }
        Ok(saved)
    }

    /// Writes `row` as a new row under `snapshot_id`, only if no row has
    /// that id: `FAILED_PRECONDITION` (nothing written) otherwise. The
    /// outcome of a claimed resume is written this way, under the
    /// [`successor_id`](super::successor_id) of the snapshot it resumed, so a paused snapshot gets
    /// at most one successor even when a resume that froze past its lease
    /// wakes up after an operator settled its calls (docs/reference.md §8). The
    /// default runs [`insert_update`] through
    /// [`save_snapshot`](Self::save_snapshot), which every store makes
    /// atomic; stores may override it with a cheaper insert-if-absent.
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        self.save_snapshot(Some(snapshot_id), insert_update(snapshot_id, row))
            .await?
            .ok_or_else(|| Error::Internal(format!("snapshot {snapshot_id} was not written")))
    }

    /// Writes each `(id, row)` as a new row, as
    /// [`insert_snapshot`](Self::insert_snapshot) does, in order, and
    /// returns the rows written. Durable stores write them in one
    /// transaction: every row or none (`FAILED_PRECONDITION`, nothing
    /// written, when any id is taken). A sub-agent's rows are written
    /// with its parent's this way, so a parent's paused snapshot is never
    /// durable without the child snapshot it names (docs/reference.md
    /// §16.8). The default inserts them one by one and stops at the first
    /// refusal, the rows before it staying written (what writing each
    /// level on its own did); stores override it to make it one step.
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        let mut written = Vec::with_capacity(rows.len());
        for (id, row) in rows {
            written.push(self.insert_snapshot(&id, row).await?);
        }
        Ok(written)
    }

    /// Requests an abort: `pending` becomes `aborting` (the worker then
    /// writes `aborted`); other rows are unchanged. Returns the status the
    /// row had, or `None` when there is no such row.
    async fn abort(&self, snapshot_id: &str) -> Result<Option<SnapshotStatus>> {
        let previous: Arc<Mutex<Option<SnapshotStatus>>> = Arc::default();
        let seen = Arc::clone(&previous);
        self.save_snapshot(
            Some(snapshot_id),
            Box::new(move |existing| {
                let Some(row) = existing else {
                    return Ok(None);
                };
                let status = row.read_status(Utc::now());
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
                if status != SnapshotStatus::Pending && status != SnapshotStatus::Expired {
                    return Ok(None);
                }
                let mut next = row.clone();
                next.status = SnapshotStatus::Aborting;
                next.updated_at = Utc::now();
                Ok(Some(next))
            }),
        )
        .await?;
        let status = *previous.lock().unwrap_or_else(|e| e.into_inner());
        Ok(status)
    }

    /// How many sessions wait for an answer — those `list_snapshots` lists
    /// with `waiting_only`, of `agent` when given — and when the oldest of
    /// their waiting snapshots was written. The default lists them all;
    /// stores override it with a count from their index of waiting rows,
    /// which is what a metrics scrape can afford to run.
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        let query = SnapshotQuery {
            agent: agent.map(str::to_owned),
            waiting_only: true,
            limit: Some(usize::MAX),
            ..SnapshotQuery::default()
        };
        let rows = self.list_snapshots(&query).await?;
        Ok(WaitingCount::of(rows.iter()))
    }

    /// Claims up to `limit` outbox rows due at `now` (pending, `dueAt` not
    /// after `now`, not leased), oldest due first, leasing each until
    /// `now + lease` and counting an attempt (docs/reference.md §11.3). A row is
    /// claimed by one caller at a time, across handles and processes;
    /// a lease that lapsed (its worker died) lets the row be claimed again.
    async fn claim_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        let _ = (now, limit, lease);
        Err(unsupported("keep an outbox"))
    }

    /// Ends the attempt of a claimed row: delivered, retry later (the
    /// backoff), dead, or cancelled. `FAILED_PRECONDITION` (nothing
    /// changed) when `token` is not the row's current claim (its lease
    /// lapsed and another worker claimed it); `NOT_FOUND` for no such row.
    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let _ = (id, token, outcome);
        Err(unsupported("keep an outbox"))
    }

    /// Ends the attempts of a batch of claimed rows, each as
    /// [`settle_outbox`](Self::settle_outbox) would, in one store round
    /// trip where the store can (one transaction); the answer has one
    /// result per settle, in order (a lost lease fails only its own).
    /// The default settles them one by one.
    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
        let mut out = Vec::with_capacity(settles.len());
        for s in settles {
            out.push(self.settle_outbox(&s.id, &s.token, s.outcome).await);
        }
        Ok(out)
    }

    /// The outbox's counts at `now` (for a metrics scrape): rows due,
    /// retrying and dead, and the earliest due time. The default lists the
    /// pending and dead rows.
    async fn outbox_stats(&self, now: DateTime<Utc>) -> Result<OutboxStats> {
        let mut rows = Vec::new();
        for state in [super::OutboxState::Pending, super::OutboxState::Dead] {
            let query = OutboxQuery {
                state: Some(state),
                limit: Some(usize::MAX),
                ..OutboxQuery::default()
            };
            rows.extend(self.list_outbox(&query).await?);
        }
        Ok(OutboxStats::of(rows.iter(), now))
    }

    /// Records that an endpoint refused for good (HTTP 410): it gets
    /// nothing more until [`enable_endpoint`](Self::enable_endpoint) or a
    /// [`retry_outbox`](Self::retry_outbox) of a row that skipped it. A
    /// second stop of one channel replaces the first.
    async fn stop_endpoint(&self, stop: EndpointStop) -> Result<()> {
        let _ = stop;
        Err(unsupported("keep an outbox"))
    }

    /// The stopped endpoints, by channel id.
    async fn stopped_endpoints(&self) -> Result<Vec<EndpointStop>> {
        Err(unsupported("keep an outbox"))
    }

    /// Re-enables the stopped endpoint of `channel`; whether it was
    /// stopped.
    async fn enable_endpoint(&self, channel: &str) -> Result<bool> {
        let _ = channel;
        Err(unsupported("keep an outbox"))
    }

    /// Writes outbox rows on their own (not with a snapshot change): the
    /// events a worker derives when a timer fires, and what an operator
    /// queues by hand.
    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        Err(unsupported("keep an outbox"))
    }

    /// Outbox rows matching `query`, oldest due first (for operators).
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        let _ = query;
        Err(unsupported("keep an outbox"))
    }

    /// One step of a prune (docs/reference.md §11.4): examines up to
    /// `request.batch` sessions after `request.after`, in session-id order,
    /// and deletes every snapshot of each one whose latest snapshot is
    /// [`prunable`](super::prunable) — and, with `request.audit`, its audit
    /// records — in one transaction. A session waiting at a hold, running,
    /// in doubt, or changed since `older_than` is kept whole; a snapshot
    /// written while the step runs is never deleted.
    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome> {
        let _ = request;
        Err(unsupported("prune sessions"))
    }

    /// Makes row `id` pending again, due now, its attempts reset (an
    /// operator's retry of a dead row), and re-enables the stopped
    /// endpoints it skipped, which it goes to again
    /// ([`apply_retry`](super::outbox::apply_retry)), in one transaction;
    /// returns it, or `None` when there is no such row.
    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        let _ = id;
        Err(unsupported("keep an outbox"))
    }

    /// Stores a new standing grant (docs/reference.md §10.9);
    /// `FAILED_PRECONDITION` when a grant has its id.
    async fn insert_grant(&self, grant: Grant) -> Result<()> {
        let _ = grant;
        Err(unsupported("keep standing grants"))
    }

    /// The grant with this id (revoked, expired and used-up ones too).
    async fn get_grant(&self, id: &str) -> Result<Option<Grant>> {
        let _ = id;
        Err(unsupported("keep standing grants"))
    }

    /// Grants matching `query`, newest first, read from the store itself
    /// on every call (no process cache), so a revoke is seen at once by
    /// every handle and process.
    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>> {
        let _ = query;
        Err(unsupported("keep standing grants"))
    }

    /// Spends one use of grant `id` at `now` ([`Grant::used_once`]) by a
    /// compare-and-set under the store's lock, and appends `audit` in the
    /// same step: the grant after the use, or `None` (nothing written) when
    /// it is missing, revoked, expired or used up — so two processes never
    /// both spend its last use.
    async fn use_grant(&self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Result<Option<Grant>> {
        let _ = (id, now, audit);
        Err(unsupported("keep standing grants"))
    }

    /// Revokes grant `id` ([`Grant::revoked`]): the grant as revoked, or
    /// `None` when there is no such grant; a grant revoked before is
    /// returned as it was.
    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
        let _ = (id, by, at);
        Err(unsupported("keep standing grants"))
    }
}

/// What [`SessionStore::count_waiting`] counts.
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

fn unsupported(what: &str) -> Error {
    Error::FailedPrecondition(format!("this session store cannot {what}"))
}
