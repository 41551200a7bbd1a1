//! `InMemoryStore`: a session store in process memory, for tests and demos.
//! Its rows (`stored`) and the packed form of settled ones (`packed`), its tables and the row
//! write (`rows`), its outbox (`outbox`: rows of kind and ids, their
//! payload built when claimed or listed), its audit log (`audit`) and its
//! standing grants (`grants`) each live in a file of their own.

mod audit;
mod grants;
mod outbox;
mod packed;
mod prune;
mod rows;
mod stored;

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use rows::Rows;
use stored::Stored;

use super::audit::AuditRecord;
use super::capability::{AuditStore, Capabilities, GrantStore, OutboxStore, PruneStore, SnapshotListing, WaitingCount};
use super::claim::ResumeClaim;
use super::listing::filter_snapshots;
use super::outbox::{OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxWrites};
use super::query::{AuditQuery, SnapshotQuery};
use super::snapshot::SnapshotUpdate;
use super::snapshot::{Snapshot, SnapshotStatus};
use super::store::SessionStore;
use super::write::mint_id;
use crate::error::{Error, Result};
use crate::hold::{Grant, GrantQuery};

/// A [`SessionStore`] in memory: fast, shared by clones, gone with the
/// process. It has every capability (listing, audit, grants, outbox,
/// prune), each a clone of the handle.
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
    /// An empty store that writes every outbox row
    /// ([`OutboxWrites::All`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that writes the outbox rows `writes` keeps: build it
    /// with [`OutboxWrites::Timers`] when no notification channel is
    /// configured.
    pub fn with_outbox_writes(writes: OutboxWrites) -> Self {
        let store = Self::default();
        store.lock().writes = writes;
        store
    }

    /// Changes which outbox rows the store writes from now on (what a
    /// restart with another configuration does to a durable store):
    /// rows written before stay as they are.
    pub fn set_outbox_writes(&self, writes: OutboxWrites) {
        self.lock().writes = writes;
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
        let rows = self.lock();
        match rows.rows.get(snapshot_id) {
            Some(row) => Ok(Some(row.to_snapshot(snapshot_id)?.as_read())),
            None => Ok(None),
        }
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "memory", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let rows = self.lock();
        let Some(ids) = rows.by_session.get(session_id) else {
            return Ok(None);
        };
        // The greatest (createdAt, snapshotId).
        let latest = ids
            .iter()
            .filter_map(|id| rows.rows.get(id).map(|row| (row.created_at(), id, row)))
            .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        match latest {
            Some((_, id, row)) => Ok(Some(row.to_snapshot(id)?.as_read())),
            None => Ok(None),
        }
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot", store = "memory", snapshot_id = snapshot_id.unwrap_or_default()), err(Display))]
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let id = match snapshot_id {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => mint_id(),
        };
        tracing::Span::current().record("snapshot_id", id.as_str());
        self.lock().save(&id, update)
    }

    /// The insert-if-absent update through `save_snapshot` (its span
    /// included, `op = save_snapshot`).
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        self.save_snapshot(Some(snapshot_id), super::write::insert_update(snapshot_id, row))
            .await?
            .ok_or_else(|| Error::Internal(format!("snapshot {snapshot_id} was not written")))
    }

    /// Every row under one lock, after checking that no id is taken: all
    /// or none.
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        let mut table = self.lock();
        // Everything that could refuse a row is checked before the first
        // is written.
        let mut seen = std::collections::HashSet::with_capacity(rows.len());
        for (id, row) in &rows {
            if table.rows.contains_key(id.as_str()) || !seen.insert(id.as_str()) {
                return Err(super::write::insert_refused(id));
            }
            if row.session_id.is_empty() {
                return Err(Error::InvalidArgument("a snapshot needs a session id".into()));
            }
        }
        let mut written = Vec::with_capacity(rows.len());
        for (id, row) in rows {
            let saved = table
                .save(&id, super::write::insert_update(&id, row))?
                .ok_or_else(|| Error::Internal(format!("snapshot {id} was not written")))?;
            written.push(saved);
        }
        Ok(written)
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "memory", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let mut rows = self.lock();
        // The claim of `claim_update`, in place: the row is not copied.
        let Some(stored) = rows.rows.get_mut(claim.snapshot_id.as_str()) else {
            return Err(Error::NotFound(format!("snapshot {} not found", claim.snapshot_id)));
        };
        stored.claim(&claim)?;
        // The claim's rows build their payload from its records at
        // delivery: the batch is shared, not copied.
        let batch: Arc<[AuditRecord]> = audit.into();
        rows.queue_decided(&claim, &batch);
        rows.audit.push(batch);
        Ok(())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "memory", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        let mut rows = self.lock();
        let Some(current) = rows.rows.get(snapshot_id).map(Stored::read_status) else {
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

    fn capabilities(&self) -> Capabilities {
        Capabilities::all(Arc::new(self.clone()))
    }
}

#[async_trait]
impl SnapshotListing for InMemoryStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "memory"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        let rows = self.lock();
        let mut live: Vec<&Snapshot> = Vec::with_capacity(rows.rows.len());
        let mut unpacked: Vec<Snapshot> = Vec::new();
        for (id, row) in &rows.rows {
            match row {
                Stored::Live(row) => live.push(row),
                packed => unpacked.push(packed.to_snapshot(id)?),
            }
        }
        Ok(filter_snapshots(live.into_iter().chain(&unpacked), query))
    }

    /// Counts from the session index, decoding nothing: the latest row of
    /// each session, when it waits.
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        let rows = self.lock();
        let mut count = WaitingCount::default();
        for ids in rows.by_session.values() {
            let latest = ids
                .iter()
                .filter_map(|id| rows.rows.get(id).map(|row| (row.created_at(), id, row)))
                .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            if let Some((created_at, _, row)) = latest
                && row.waits_for(agent)
            {
                count.count += 1;
                count.oldest = Some(count.oldest.map_or(created_at, |o| o.min(created_at)));
            }
        }
        Ok(count)
    }
}

#[async_trait]
impl AuditStore for InMemoryStore {
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
            .newest_first()
            .filter(|r| query.matches(r))
            .take(query.limit())
            .cloned()
            .collect())
    }

    /// The row and its records under one lock: both or neither.
    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        let mut rows = self.lock();
        let saved = rows.save(snapshot_id, update)?;
        if saved.is_some() {
            rows.audit.extend(audit);
        }
        Ok(saved)
    }
}

#[async_trait]
impl GrantStore for InMemoryStore {
    async fn insert_grant(&self, grant: Grant) -> Result<()> {
        self.lock().insert_grant(grant)
    }

    async fn get_grant(&self, id: &str) -> Result<Option<Grant>> {
        Ok(self.lock().get_grant(id))
    }

    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>> {
        Ok(self.lock().list_grants(query))
    }

    async fn use_grant(&self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Result<Option<Grant>> {
        Ok(self.lock().use_grant(id, now, audit))
    }

    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
        Ok(self.lock().revoke_grant(id, by, at))
    }
}

#[async_trait]
impl OutboxStore for InMemoryStore {
    async fn claim_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        Ok(self.lock().claim_outbox(now, limit, lease))
    }

    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        self.lock().settle_outbox(id, token, outcome)
    }

    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
        let mut rows = self.lock();
        Ok(settles
            .into_iter()
            .map(|s| rows.settle_outbox(&s.id, &s.token, s.outcome))
            .collect())
    }

    async fn outbox_stats(&self, now: DateTime<Utc>) -> Result<crate::session::OutboxStats> {
        let rows = self.lock();
        Ok(crate::session::OutboxStats::of(
            rows.outbox.iter().map(|q| &q.event),
            now,
        ))
    }

    async fn stop_endpoint(&self, stop: crate::session::EndpointStop) -> Result<()> {
        let mut rows = self.lock();
        rows.stopped.retain(|s| s.channel != stop.channel);
        rows.stopped.push(stop);
        Ok(())
    }

    async fn stopped_endpoints(&self) -> Result<Vec<crate::session::EndpointStop>> {
        let mut out = self.lock().stopped.clone();
        out.sort_by(|a, b| a.channel.cmp(&b.channel));
        Ok(out)
    }

    async fn enable_endpoint(&self, channel: &str) -> Result<bool> {
        let mut rows = self.lock();
        let before = rows.stopped.len();
        rows.stopped.retain(|s| s.channel != channel);
        Ok(rows.stopped.len() != before)
    }

    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        self.lock().enqueue(events);
        Ok(())
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        Ok(self.lock().list_outbox(query))
    }

    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        Ok(self.lock().retry_outbox(id))
    }
}

#[async_trait]
impl PruneStore for InMemoryStore {
    async fn prune_sessions(&self, request: &crate::session::PruneRequest) -> Result<crate::session::PruneOutcome> {
        self.lock().prune(request)
    }
}

#[cfg(test)]
mod outbox_tests;
#[cfg(test)]
mod tests;
