//! `InMemoryStore`: a session store in process memory, for tests and demos.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use super::audit::{AuditQuery, AuditRecord, SnapshotQuery};
use super::snapshot::{Snapshot, SnapshotStatus};
use super::store::{ResumeClaim, SessionStore, SnapshotUpdate, apply_claim, filter_snapshots, mint_id, prepare_row};
use crate::error::{Error, Result};

#[derive(Default)]
struct Rows {
    rows: HashMap<String, Snapshot>,
    /// Snapshot ids by session, for `get_latest_snapshot`.
    by_session: HashMap<String, Vec<String>>,
    audit: Vec<AuditRecord>,
    watchers: HashMap<String, watch::Sender<SnapshotStatus>>,
}

/// A [`SessionStore`] in memory: fast, shared by clones, gone with the
/// process.
///
/// ```
/// use holdpoint::session::{InMemoryStore, SessionStore, Snapshot, SessionState};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = InMemoryStore::new();
/// let saved = store
///     .save_snapshot(None, Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s1"))))))
///     .await?
///     .expect("written");
/// let read = store.get_snapshot(&saved.snapshot_id).await?.expect("present");
/// assert_eq!(read.session_id, "s1");
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct InMemoryStore {
    inner: Arc<Mutex<Rows>>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Rows> {
        // Every critical section leaves the maps consistent, so a poisoned
        // lock (a panicking test thread) is safe to keep using.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many snapshots the store holds.
    pub fn len(&self) -> usize {
        self.lock().rows.len()
    }

    /// Whether the store holds no snapshot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl SessionStore for InMemoryStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "get_snapshot", store = "memory", snapshot_id = snapshot_id), err(Display))]
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        Ok(self.lock().rows.get(snapshot_id).cloned().map(Snapshot::as_read))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "memory", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let rows = self.lock();
        let Some(ids) = rows.by_session.get(session_id) else {
            return Ok(None);
        };
        let latest = ids.iter().filter_map(|id| rows.rows.get(id)).max_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.snapshot_id.cmp(&b.snapshot_id))
        });
        Ok(latest.cloned().map(Snapshot::as_read))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot", store = "memory", snapshot_id = snapshot_id.unwrap_or_default()), err(Display))]
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let id = match snapshot_id {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => mint_id(),
        };
        tracing::Span::current().record("snapshot_id", id.as_str());
        let mut rows = self.lock();
        let existing = rows.rows.get(&id);
        let Some(next) = update(existing)? else {
            return Ok(None);
        };
        let row = prepare_row(&id, existing, next)?;
        let status = row.as_read_status();
        if existing.is_none() {
            rows.by_session
                .entry(row.session_id.clone())
                .or_default()
                .push(id.clone());
        }
        rows.rows.insert(id.clone(), row.clone());
        if let Some(tx) = rows.watchers.get(&id) {
            tx.send_replace(status);
        }
        Ok(Some(row))
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "memory"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        Ok(filter_snapshots(self.lock().rows.values(), query))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "append_audit", store = "memory", records = records.len()), err(Display))]
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        self.lock().audit.extend(records);
        Ok(())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_audit", store = "memory"), err(Display))]
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let rows = self.lock();
        Ok(rows
            .audit
            .iter()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.limit())
            .cloned()
            .collect())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "memory", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let mut rows = self.lock();
        // The claim of `claim_update`, in place: the row is not copied.
        let Some(row) = rows.rows.get_mut(&claim.snapshot_id) else {
            return Err(Error::NotFound(format!("snapshot {} not found", claim.snapshot_id)));
        };
        apply_claim(row, &claim)?;
        rows.audit.extend(audit);
        Ok(())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "memory", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        let mut rows = self.lock();
        let Some(current) = rows.rows.get(snapshot_id).map(|s| s.as_read_status()) else {
            return Ok(futures::stream::empty().boxed());
        };
        let rx = match rows.watchers.get(snapshot_id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(current);
                rows.watchers.insert(snapshot_id.to_owned(), tx);
                rx
            }
        };
        // The first item is the status as read now (a stale pending row
        // reads as expired), whatever the channel last carried.
        Ok(futures::stream::once(async move { current })
            .chain(WatchStream::from_changes(rx))
            .boxed())
    }
}

trait ReadStatus {
    fn as_read_status(&self) -> SnapshotStatus;
}

impl ReadStatus for Snapshot {
    fn as_read_status(&self) -> SnapshotStatus {
        self.read_status(chrono::Utc::now())
    }
}
