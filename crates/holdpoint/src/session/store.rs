//! The `SessionStore` trait: the eight methods every store has, what an
//! exactly-once resume needs (read, write, insert-if-absent, claim,
//! watch), and `capabilities`, the handles of the capability traits the
//! store also implements (`capability`). The rules its implementations
//! share live beside it: the claim and lease of a resume (`claim`), the
//! checks of a written row (`write`), the reference listing (`listing`)
//! and the query types (`query`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::Utc;
use futures::stream::BoxStream;

use super::audit::AuditRecord;
use super::capability::Capabilities;
use super::claim::ResumeClaim;
use super::snapshot::{Snapshot, SnapshotStatus, SnapshotUpdate};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

/// A store of session snapshots.
///
/// Implementations must make [`save_snapshot`](Self::save_snapshot) atomic
/// (two concurrent saves of one id never both see the same old row), keep
/// the session id of an existing row, return copies rather than aliases,
/// and report status changes to [`watch_status`](Self::watch_status)
/// subscribers. The `holdpoint-testkit` store suite checks all of it.
///
/// Everything else a store may do is a capability trait of its own
/// ([`SnapshotListing`](super::SnapshotListing), [`AuditStore`](super::AuditStore),
/// [`GrantStore`](super::GrantStore), [`OutboxStore`](super::OutboxStore),
/// [`PruneStore`](super::PruneStore)), which
/// [`capabilities`](Self::capabilities) hands out; what needs one refuses,
/// when it is built, a store without it.
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
/// // Listing is a capability: the in-memory store has it.
/// let listing = store.capabilities().listing()?.clone();
/// let waiting = listing
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

    /// Writes `row` as a new row under `snapshot_id`, only if no row has
    /// that id: [`Error::AlreadyExists`] (nothing written) otherwise. The
    /// outcome of a claimed resume is written this way, under the
    /// [`successor_id`](super::successor_id) of the snapshot it resumed, so a paused snapshot gets
    /// at most one successor even when a resume that froze past its lease
    /// wakes up after an operator settled its calls (docs/reference.md §8).
    /// [`insert_update`](super::insert_update) through
    /// [`save_snapshot`](Self::save_snapshot) is a correct body; stores may
    /// write a cheaper insert-if-absent.
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot>;

    /// Writes each `(id, row)` as a new row, as
    /// [`insert_snapshot`](Self::insert_snapshot) does, in order, and
    /// returns the rows written: every row or none
    /// ([`Error::AlreadyExists`], nothing written, when any id is taken).
    /// A sub-agent's rows are written with its parent's this way, so a
    /// parent's paused snapshot is never durable without the child snapshot
    /// it names (docs/reference.md §16.8).
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>>;

    /// The exactly-once guard of a resume (docs/reference.md §7): applies
    /// [`claim_update`](super::claim_update) to the claimed snapshot
    /// (failing with `ABORTED`, "already resumed", when it was) and writes
    /// `audit`, the decisions the resume carries, with it — in one
    /// transaction in durable stores. A store with an
    /// [`AuditStore`](super::AuditStore) keeps them in its trail (and, with
    /// an [`OutboxStore`](super::OutboxStore), queues the events they
    /// raise); a store with neither has nowhere to keep them.
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()>;

    /// The row's status now, then each change (changes may be coalesced).
    /// The stream ends when the row does not exist, and stops when dropped.
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>>;

    /// What the store can do beyond this trait: each capability trait it
    /// implements, as a handle ([`Capabilities::all`] for a store that has
    /// every one). Read once, when an agent, a server or a worker is built
    /// on the store, which refuses a store without what it needs
    /// ([`Error::MissingCapability`]). The default is none.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
}

/// What every [`SessionStore`] can do through the required methods,
/// written once over them (a decorator forwards the required methods and
/// gets these for free).
#[async_trait]
pub trait SessionStoreExt: SessionStore {
    /// Requests an abort: `pending` (or a stale pending row read as
    /// `expired`) becomes `aborting` (the worker then writes `aborted`);
    /// other rows are unchanged. Returns the status the row had, or `None`
    /// when there is no such row.
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
}

impl<S: SessionStore + ?Sized> SessionStoreExt for S {}
