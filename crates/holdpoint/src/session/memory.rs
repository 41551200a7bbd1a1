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
use super::store::{SessionStore, SnapshotUpdate, filter_snapshots, mint_id, prepare_row};
use crate::error::{Error, Result};

/// The rows. A row is boxed (the table holds a pointer, not a whole
/// `Snapshot`, per slot) and its id is shared by the table and the session
/// index: what a paused session costs is mostly its own data.
#[derive(Default)]
struct Rows {
    rows: HashMap<Arc<str>, Box<Snapshot>>,
    /// Snapshot ids by session, for `get_latest_snapshot`.
    by_session: HashMap<String, Vec<Arc<str>>>,
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
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        Ok(self.lock().rows.get(snapshot_id).map(|row| (**row).clone().as_read()))
    }

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
        Ok(latest.map(|row| (**row).clone().as_read()))
    }

    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let id = match snapshot_id {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => mint_id(),
        };
        let mut rows = self.lock();
        let existing = rows.rows.get(id.as_str()).map(|row| &**row);
        let Some(next) = update(existing)? else {
            return Ok(None);
        };
        let row = prepare_row(&id, existing, next)?;
        let status = row.as_read_status();
        let stored = Box::new(row.clone());
        if let Some(slot) = rows.rows.get_mut(id.as_str()) {
            *slot = stored;
        } else {
            let key: Arc<str> = Arc::from(id.as_str());
            rows.by_session
                .entry(row.session_id.clone())
                .or_insert_with(|| Vec::with_capacity(1))
                .push(Arc::clone(&key));
            rows.rows.insert(key, stored);
        }
        if let Some(tx) = rows.watchers.get(&id) {
            tx.send_replace(status);
        }
        Ok(Some(row))
    }

    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        Ok(filter_snapshots(self.lock().rows.values().map(|row| &**row), query))
    }

    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        self.lock().audit.extend(records);
        Ok(())
    }

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

    async fn claim_resume(&self, snapshot_id: &str, audit: Vec<AuditRecord>) -> Result<()> {
        let mut rows = self.lock();
        // The claim of `claim_update`, in place: the row is not copied.
        let Some(row) = rows.rows.get_mut(snapshot_id) else {
            return Err(Error::NotFound(format!("snapshot {snapshot_id} not found")));
        };
        if row.resumed_at.is_some() {
            return Err(Error::AlreadyResumed(snapshot_id.to_owned()));
        }
        row.resumed_at = Some(chrono::Utc::now());
        rows.audit.extend(audit);
        Ok(())
    }

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
