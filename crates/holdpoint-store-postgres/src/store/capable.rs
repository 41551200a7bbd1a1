//! The capability traits of [`PostgresStore`]: it has every one (listing, audit,
//! grants, outbox, prune); each method hands the work to the same writer
//! and readers as the required trait's.

use super::*;

#[async_trait]
impl SnapshotListing for PostgresStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "postgres"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        read::list(&self.inner.pool, query).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "count_waiting", store = "postgres"),
        err(Display)
    )]
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        read::count_waiting(&self.inner.pool, agent).await
    }
}

#[async_trait]
impl AuditStore for PostgresStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "append_audit", store = "postgres", records = records.len()), err(Display))]
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let err = |e| store_error("append audit records", e);
        let mut tx = self.inner.pool.begin().await.map_err(err)?;
        write::insert_audit(&mut tx, &records).await?;
        tx.commit().await.map_err(err)
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_audit", store = "postgres"),
        err(Display)
    )]
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        read::audit(&self.inner.pool, query).await
    }

    /// The row and its records in one transaction: both or neither.
    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot_audited", store = "postgres", snapshot_id = snapshot_id, records = audit.len()), err(Display))]
    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        grants::save_audited(
            &self.inner.pool,
            snapshot_id,
            update,
            &audit,
            self.inner.options.outbox_writes,
        )
        .await
    }
}

#[async_trait]
impl GrantStore for PostgresStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_grant", store = "postgres", grant_id = %grant.id), err(Display))]
    async fn insert_grant(&self, grant: Grant) -> Result<()> {
        grants::insert(&self.inner.pool, &grant).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_grant", store = "postgres", grant_id = id), err(Display))]
    async fn get_grant(&self, id: &str) -> Result<Option<Grant>> {
        grants::get(&self.inner.pool, id).await
    }

    /// Read from the database on every call (no cache): a revoke on any
    /// replica is seen by the next read.
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_grants", store = "postgres"),
        err(Display)
    )]
    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>> {
        grants::list(&self.inner.pool, query).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "use_grant", store = "postgres", grant_id = id), err(Display))]
    async fn use_grant(
        &self,
        id: &str,
        now: chrono::DateTime<chrono::Utc>,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Grant>> {
        grants::spend(&self.inner.pool, id, now, &audit).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "revoke_grant", store = "postgres", grant_id = id), err(Display))]
    async fn revoke_grant(&self, id: &str, by: &str, at: chrono::DateTime<chrono::Utc>) -> Result<Option<Grant>> {
        grants::revoke(&self.inner.pool, id, by, at).await
    }
}

#[async_trait]
impl OutboxStore for PostgresStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "claim_outbox", store = "postgres", limit),
        err(Display)
    )]
    async fn claim_outbox(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        outbox::claim(&self.inner.pool, now, limit, lease).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "settle_outbox", store = "postgres", event_id = id), err(Display))]
    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        outbox::settle(&self.inner.pool, id, token, outcome).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "settle_outbox_batch", store = "postgres", events = settles.len()), err(Display))]
    async fn settle_outbox_batch(&self, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
        outbox::settle_batch(&self.inner.pool, settles).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "outbox_stats", store = "postgres"),
        err(Display)
    )]
    async fn outbox_stats(&self, now: chrono::DateTime<chrono::Utc>) -> Result<OutboxStats> {
        endpoints::stats(&self.inner.pool, now).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "stop_endpoint", store = "postgres", channel = %stop.channel), err(Display))]
    async fn stop_endpoint(&self, stop: EndpointStop) -> Result<()> {
        endpoints::stop(&self.inner.pool, &stop).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "stopped_endpoints", store = "postgres"),
        err(Display)
    )]
    async fn stopped_endpoints(&self) -> Result<Vec<EndpointStop>> {
        endpoints::stopped(&self.inner.pool).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "enable_endpoint", store = "postgres", channel),
        err(Display)
    )]
    async fn enable_endpoint(&self, channel: &str) -> Result<bool> {
        endpoints::enable(&self.inner.pool, channel).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "enqueue_outbox", store = "postgres", events = events.len()), err(Display))]
    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        outbox::enqueue(&self.inner.pool, &events).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_outbox", store = "postgres"),
        err(Display)
    )]
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        outbox::list(&self.inner.pool, query).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "retry_outbox", store = "postgres", event_id = id), err(Display))]
    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        outbox::retry(&self.inner.pool, id).await
    }
}

#[async_trait]
impl PruneStore for PostgresStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "prune_sessions", store = "postgres"),
        err(Display)
    )]
    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome> {
        crate::prune::step(&self.inner.pool, request).await
    }
}
