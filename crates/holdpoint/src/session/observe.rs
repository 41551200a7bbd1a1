//! The one decorator pattern over the store traits: [`Observed`] wraps a
//! [`SessionStore`] and each capability handle it has, and tells a
//! [`StoreObserver`] when each operation starts and how it ended (a
//! server's latency metrics, a benchmark's commit count, tracing).
//!
//! Invariant: an observed store has exactly the capabilities of the store
//! it wraps — [`observe`] wraps each handle of the inner
//! [`capabilities`](SessionStore::capabilities) and nothing else — and
//! every method of every trait is forwarded (the traits have no default
//! methods a decorator could forget), so an observer sees every operation.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;

use super::audit::AuditRecord;
use super::capability::{AuditStore, Capabilities, GrantStore, OutboxStore, PruneStore, SnapshotListing, WaitingCount};
use super::claim::ResumeClaim;
use super::outbox::{EndpointStop, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxStats};
use super::prune::{PruneOutcome, PruneRequest};
use super::query::{AuditQuery, SnapshotQuery};
use super::snapshot::{Snapshot, SnapshotStatus, SnapshotUpdate};
use super::store::SessionStore;
use crate::error::{Error, Result};
use crate::hold::{Grant, GrantQuery};

/// One store operation, as an observer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreOp {
    /// The method's name (`save_snapshot`, `list_audit`, …).
    pub name: &'static str,
    /// Whether it commits a write (a save, an insert, a claim, an audited
    /// save, a grant's use or change, an outbox change, a prune).
    pub writes: bool,
}

const fn read(name: &'static str) -> StoreOp {
    StoreOp { name, writes: false }
}

const fn write(name: &'static str) -> StoreOp {
    StoreOp { name, writes: true }
}

/// What an [`Observed`] store reports to.
pub trait StoreObserver: Send + Sync + 'static {
    /// What `start` hands to `finish` (an `Instant` for a timer, `()` for
    /// a counter).
    type Started: Send;

    /// An operation begins.
    fn start(&self, op: StoreOp) -> Self::Started;

    /// The operation ended, with `error` when it failed.
    fn finish(&self, op: StoreOp, started: Self::Started, error: Option<&Error>);
}

/// A store (or a capability handle) whose operations `O` observes; built
/// with [`observe`].
pub struct Observed<S: ?Sized, O> {
    inner: Arc<S>,
    observer: Arc<O>,
    /// The observed handles of the inner store's capabilities (empty on a
    /// capability handle itself).
    capabilities: Capabilities,
}

/// `store`, its every operation (and its capabilities' every operation)
/// reported to `observer`.
pub fn observe<O: StoreObserver>(store: Arc<dyn SessionStore>, observer: Arc<O>) -> Observed<dyn SessionStore, O> {
    let inner = store.capabilities();
    let capabilities = Capabilities {
        listing: inner.listing.map(|s| wrap(s, &observer) as Arc<dyn SnapshotListing>),
        audit: inner.audit.map(|s| wrap(s, &observer) as Arc<dyn AuditStore>),
        grants: inner.grants.map(|s| wrap(s, &observer) as Arc<dyn GrantStore>),
        outbox: inner.outbox.map(|s| wrap(s, &observer) as Arc<dyn OutboxStore>),
        prune: inner.prune.map(|s| wrap(s, &observer) as Arc<dyn PruneStore>),
    };
    Observed {
        inner: store,
        observer,
        capabilities,
    }
}

fn wrap<S: ?Sized, O>(inner: Arc<S>, observer: &Arc<O>) -> Arc<Observed<S, O>> {
    Arc::new(Observed {
        inner,
        observer: Arc::clone(observer),
        capabilities: Capabilities::default(),
    })
}

impl<S: ?Sized, O: StoreObserver> Observed<S, O> {
    /// The observer this store reports to.
    pub fn observer(&self) -> &Arc<O> {
        &self.observer
    }

    async fn run<T>(&self, op: StoreOp, work: impl Future<Output = Result<T>>) -> Result<T> {
        let started = self.observer.start(op);
        let out = work.await;
        self.observer.finish(op, started, out.as_ref().err());
        out
    }
}

#[async_trait]
impl<O: StoreObserver> SessionStore for Observed<dyn SessionStore, O> {
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        self.run(read("get_snapshot"), self.inner.get_snapshot(snapshot_id))
            .await
    }

    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let op = read("get_latest_snapshot");
        self.run(op, self.inner.get_latest_snapshot(session_id)).await
    }

    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let op = write("save_snapshot");
        self.run(op, self.inner.save_snapshot(snapshot_id, update)).await
    }

    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        let op = write("insert_snapshot");
        self.run(op, self.inner.insert_snapshot(snapshot_id, row)).await
    }

    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        self.run(write("insert_snapshots"), self.inner.insert_snapshots(rows))
            .await
    }

    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        self.run(write("claim_resume"), self.inner.claim_resume(claim, audit))
            .await
    }

    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        self.run(read("watch_status"), self.inner.watch_status(snapshot_id))
            .await
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities.clone()
    }
}

#[async_trait]
impl<O: StoreObserver> SnapshotListing for Observed<dyn SnapshotListing, O> {
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        self.run(read("list_snapshots"), self.inner.list_snapshots(query)).await
    }

    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        self.run(read("count_waiting"), self.inner.count_waiting(agent)).await
    }
}

#[async_trait]
impl<O: StoreObserver> AuditStore for Observed<dyn AuditStore, O> {
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        self.run(write("append_audit"), self.inner.append_audit(records)).await
    }

    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        self.run(read("list_audit"), self.inner.list_audit(query)).await
    }

    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        let op = write("save_snapshot_audited");
        self.run(op, self.inner.save_snapshot_audited(snapshot_id, update, audit))
            .await
    }
}

#[async_trait]
impl<O: StoreObserver> GrantStore for Observed<dyn GrantStore, O> {
    async fn insert_grant(&self, grant: Grant) -> Result<()> {
        self.run(write("insert_grant"), self.inner.insert_grant(grant)).await
    }

    async fn get_grant(&self, id: &str) -> Result<Option<Grant>> {
        self.run(read("get_grant"), self.inner.get_grant(id)).await
    }

    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>> {
        self.run(read("list_grants"), self.inner.list_grants(query)).await
    }

    async fn use_grant(&self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Result<Option<Grant>> {
        self.run(write("use_grant"), self.inner.use_grant(id, now, audit)).await
    }

    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
        self.run(write("revoke_grant"), self.inner.revoke_grant(id, by, at))
            .await
    }
}

#[async_trait]
impl<O: StoreObserver> OutboxStore for Observed<dyn OutboxStore, O> {
    async fn claim_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        let op = write("claim_outbox");
        self.run(op, self.inner.claim_outbox(now, limit, lease)).await
    }

    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let op = write("settle_outbox");
        self.run(op, self.inner.settle_outbox(id, token, outcome)).await
    }

    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
        let op = write("settle_outbox_batch");
        self.run(op, self.inner.settle_outbox_batch(settles)).await
    }

    async fn outbox_stats(&self, now: DateTime<Utc>) -> Result<OutboxStats> {
        self.run(read("outbox_stats"), self.inner.outbox_stats(now)).await
    }

    async fn stop_endpoint(&self, stop: EndpointStop) -> Result<()> {
        self.run(write("stop_endpoint"), self.inner.stop_endpoint(stop)).await
    }

    async fn stopped_endpoints(&self) -> Result<Vec<EndpointStop>> {
        self.run(read("stopped_endpoints"), self.inner.stopped_endpoints())
            .await
    }

    async fn enable_endpoint(&self, channel: &str) -> Result<bool> {
        self.run(write("enable_endpoint"), self.inner.enable_endpoint(channel))
            .await
    }

    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        self.run(write("enqueue_outbox"), self.inner.enqueue_outbox(events))
            .await
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        self.run(read("list_outbox"), self.inner.list_outbox(query)).await
    }

    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        self.run(write("retry_outbox"), self.inner.retry_outbox(id)).await
    }
}

#[async_trait]
impl<O: StoreObserver> PruneStore for Observed<dyn PruneStore, O> {
    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome> {
        self.run(write("prune_sessions"), self.inner.prune_sessions(request))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::session::{InMemoryStore, SessionState, SessionStoreExt};

    #[derive(Default)]
    struct Log(Mutex<Vec<&'static str>>);

    impl StoreObserver for Log {
        type Started = ();
        fn start(&self, _op: StoreOp) {}
        fn finish(&self, op: StoreOp, (): (), _error: Option<&Error>) {
            self.0.lock().unwrap().push(op.name);
        }
    }

    #[tokio::test]
    async fn an_observed_store_has_the_inner_capabilities_and_reports_through_them() {
        let log = Arc::new(Log::default());
        let store = Arc::new(observe(Arc::new(InMemoryStore::new()), Arc::clone(&log)));
        let row = Snapshot::new(SessionState::new("s1"));
        let saved = store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await
            .unwrap()
            .unwrap();
        store.abort(&saved.snapshot_id).await.unwrap();
        let caps = store.capabilities();
        assert_eq!(caps.names(), ["listing", "audit", "grants", "outbox", "prune"]);
        caps.listing().unwrap().count_waiting(None).await.unwrap();
        caps.audit().unwrap().append_audit(Vec::new()).await.unwrap();
        let seen = log.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            ["save_snapshot", "save_snapshot", "count_waiting", "append_audit"]
        );
    }

    #[test]
    fn a_store_without_capabilities_stays_without() {
        struct Bare;
        #[async_trait]
        impl SessionStore for Bare {
            async fn get_snapshot(&self, _: &str) -> Result<Option<Snapshot>> {
                Ok(None)
            }
            async fn get_latest_snapshot(&self, _: &str) -> Result<Option<Snapshot>> {
                Ok(None)
            }
            async fn save_snapshot(&self, _: Option<&str>, _: SnapshotUpdate) -> Result<Option<Snapshot>> {
                Ok(None)
            }
            async fn insert_snapshot(&self, id: &str, _: Snapshot) -> Result<Snapshot> {
                Err(Error::AlreadyExists(id.to_owned()))
            }
            async fn insert_snapshots(&self, _: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
                Ok(Vec::new())
            }
            async fn claim_resume(&self, _: ResumeClaim, _: Vec<AuditRecord>) -> Result<()> {
                Ok(())
            }
            async fn watch_status(&self, _: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
                Ok(Box::pin(futures::stream::empty()))
            }
        }
        let store = observe(Arc::new(Bare), Arc::new(Log::default()));
        let caps = store.capabilities();
        assert!(caps.names().is_empty());
        let err = caps.outbox().err().unwrap();
        assert!(
            matches!(
                err,
                Error::MissingCapability {
                    capability: "outbox",
                    ..
                }
            ),
            "{err}"
        );
    }
}
