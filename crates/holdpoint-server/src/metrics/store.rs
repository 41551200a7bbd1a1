//! The store decorator that times every operation of the store it wraps.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::{
    AuditQuery, AuditRecord, ResumeClaim, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus, SnapshotUpdate,
    WaitingCount,
};
use holdpoint::session::{
    EndpointStop, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxStats, PruneOutcome,
    PruneRequest,
};

use super::Metrics;

/// A store that times every operation of the store it wraps.
pub(super) struct TimedStore {
    inner: Arc<dyn SessionStore>,
    metrics: Metrics,
}

impl TimedStore {
    pub(super) fn new(inner: Arc<dyn SessionStore>, metrics: Metrics) -> Self {
        TimedStore { inner, metrics }
    }

    async fn timed<T>(
        &self,
        op: &'static str,
        f: impl std::future::Future<Output = holdpoint::Result<T>>,
    ) -> holdpoint::Result<T> {
        let started = Instant::now();
        let out = f.await;
        self.metrics.store_op(op, started.elapsed(), out.as_ref().err());
        out
    }
}

#[async_trait]
impl SessionStore for TimedStore {
    async fn get_snapshot(&self, snapshot_id: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("get_snapshot", self.inner.get_snapshot(snapshot_id)).await
    }

    async fn get_latest_snapshot(&self, session_id: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("get_latest_snapshot", self.inner.get_latest_snapshot(session_id))
            .await
    }

    async fn save_snapshot(
        &self,
        snapshot_id: Option<&str>,
        update: SnapshotUpdate,
    ) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("save_snapshot", self.inner.save_snapshot(snapshot_id, update))
            .await
    }

    async fn watch_status(&self, snapshot_id: &str) -> holdpoint::Result<BoxStream<'static, SnapshotStatus>> {
        self.timed("watch_status", self.inner.watch_status(snapshot_id)).await
    }

    async fn list_snapshots(&self, query: &SnapshotQuery) -> holdpoint::Result<Vec<Snapshot>> {
        self.timed("list_snapshots", self.inner.list_snapshots(query)).await
    }

    async fn append_audit(&self, records: Vec<AuditRecord>) -> holdpoint::Result<()> {
        self.timed("append_audit", self.inner.append_audit(records)).await
    }

    async fn list_audit(&self, query: &AuditQuery) -> holdpoint::Result<Vec<AuditRecord>> {
        self.timed("list_audit", self.inner.list_audit(query)).await
    }

    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> holdpoint::Result<()> {
        self.timed("claim_resume", self.inner.claim_resume(claim, audit)).await
    }

    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> holdpoint::Result<Snapshot> {
        self.timed("insert_snapshot", self.inner.insert_snapshot(snapshot_id, row))
            .await
    }

    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> holdpoint::Result<Vec<Snapshot>> {
        self.timed("insert_snapshots", self.inner.insert_snapshots(rows)).await
    }

    async fn count_waiting(&self, agent: Option<&str>) -> holdpoint::Result<WaitingCount> {
        self.timed("count_waiting", self.inner.count_waiting(agent)).await
    }

    async fn abort(&self, snapshot_id: &str) -> holdpoint::Result<Option<SnapshotStatus>> {
        self.timed("abort", self.inner.abort(snapshot_id)).await
    }

    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> holdpoint::Result<Option<Snapshot>> {
        self.timed(
            "save_snapshot_audited",
            self.inner.save_snapshot_audited(snapshot_id, update, audit),
        )
        .await
    }

    async fn insert_grant(&self, grant: Grant) -> holdpoint::Result<()> {
        self.timed("insert_grant", self.inner.insert_grant(grant)).await
    }

    async fn get_grant(&self, id: &str) -> holdpoint::Result<Option<Grant>> {
        self.timed("get_grant", self.inner.get_grant(id)).await
    }

    async fn list_grants(&self, query: &GrantQuery) -> holdpoint::Result<Vec<Grant>> {
        self.timed("list_grants", self.inner.list_grants(query)).await
    }

    async fn use_grant(
        &self,
        id: &str,
        now: DateTime<Utc>,
        audit: Vec<AuditRecord>,
    ) -> holdpoint::Result<Option<Grant>> {
        self.timed("use_grant", self.inner.use_grant(id, now, audit)).await
    }

    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> holdpoint::Result<Option<Grant>> {
        self.timed("revoke_grant", self.inner.revoke_grant(id, by, at)).await
    }

    async fn claim_outbox(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> holdpoint::Result<Vec<OutboxLease>> {
        self.timed("claim_outbox", self.inner.claim_outbox(now, limit, lease))
            .await
    }

    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> holdpoint::Result<()> {
        self.timed("settle_outbox", self.inner.settle_outbox(id, token, outcome))
            .await
    }

    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> holdpoint::Result<Vec<holdpoint::Result<()>>> {
        self.timed("settle_outbox_batch", self.inner.settle_outbox_batch(settles))
            .await
    }

    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> holdpoint::Result<()> {
        self.timed("enqueue_outbox", self.inner.enqueue_outbox(events)).await
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> holdpoint::Result<Vec<OutboxEvent>> {
        self.timed("list_outbox", self.inner.list_outbox(query)).await
    }

    async fn retry_outbox(&self, id: &str) -> holdpoint::Result<Option<OutboxEvent>> {
        self.timed("retry_outbox", self.inner.retry_outbox(id)).await
    }

    async fn prune_sessions(&self, request: &PruneRequest) -> holdpoint::Result<PruneOutcome> {
        self.timed("prune_sessions", self.inner.prune_sessions(request)).await
    }

    async fn outbox_stats(&self, now: chrono::DateTime<chrono::Utc>) -> holdpoint::Result<OutboxStats> {
        self.timed("outbox_stats", self.inner.outbox_stats(now)).await
    }

    async fn stop_endpoint(&self, stop: EndpointStop) -> holdpoint::Result<()> {
        self.timed("stop_endpoint", self.inner.stop_endpoint(stop)).await
    }

    async fn stopped_endpoints(&self) -> holdpoint::Result<Vec<EndpointStop>> {
        self.timed("stopped_endpoints", self.inner.stopped_endpoints()).await
    }

    async fn enable_endpoint(&self, channel: &str) -> holdpoint::Result<bool> {
        self.timed("enable_endpoint", self.inner.enable_endpoint(channel)).await
    }
}
