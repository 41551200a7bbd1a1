//! The capability traits of [`SqliteStore`]: it has every one (listing, audit,
//! grants, outbox, prune); each method hands the work to the same writer
//! and readers as the required trait's.

use super::*;

#[async_trait]
impl SnapshotListing for SqliteStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "sqlite"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        let query = query.clone();
        self.inner
            .readers
            .run_blocking("list snapshots", move |conn| read::list(conn, &query))
            .await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "count_waiting", store = "sqlite"),
        err(Display)
    )]
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        let agent = agent.map(str::to_owned);
        self.inner
            .readers
            .run_blocking("count waiting sessions", move |conn| {
                read::count_waiting(conn, agent.as_deref())
            })
            .await
    }
}

#[async_trait]
impl AuditStore for SqliteStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "append_audit", store = "sqlite", records = records.len()), err(Display))]
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.inner.writer.write(Op::Audit { records }).await.map(|_| ())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_audit", store = "sqlite"), err(Display))]
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let query = query.clone();
        self.inner
            .readers
            .run_blocking("list audit records", move |conn| read::audit(conn, &query))
            .await
    }

    /// The row and its records in one transaction: both or neither.
    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot_audited", store = "sqlite", snapshot_id = snapshot_id, records = audit.len()), err(Display))]
    async fn save_snapshot_audited(
        &self,
        snapshot_id: &str,
        update: SnapshotUpdate,
        audit: Vec<AuditRecord>,
    ) -> Result<Option<Snapshot>> {
        let id = snapshot_id.to_owned();
        let writes = self.inner.options.outbox_writes;
        let saved = self
            .outbox_write(move |conn| crate::group::save_audited(conn, &id, update, &audit, writes))
            .await?;
        if let Some(row) = &saved {
            self.inner
                .watchers
                .publish(&row.snapshot_id, row.read_status(chrono::Utc::now()));
        }
        Ok(saved)
    }
}

#[async_trait]
impl GrantStore for SqliteStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_grant", store = "sqlite", grant_id = %grant.id), err(Display))]
    async fn insert_grant(&self, grant: Grant) -> Result<()> {
        self.outbox_write(move |conn| crate::grants::insert(conn, &grant)).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_grant", store = "sqlite", grant_id = id), err(Display))]
    async fn get_grant(&self, id: &str) -> Result<Option<Grant>> {
        self.read_row("read a grant", |conn| crate::grants::get(conn, id))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_grants", store = "sqlite"), err(Display))]
    async fn list_grants(&self, query: &GrantQuery) -> Result<Vec<Grant>> {
        self.read_row("list grants", |conn| crate::grants::list(conn, query))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "use_grant", store = "sqlite", grant_id = id), err(Display))]
    async fn use_grant(&self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Result<Option<Grant>> {
        let id = id.to_owned();
        self.outbox_write(move |conn| crate::grants::spend(conn, &id, now, &audit))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "revoke_grant", store = "sqlite", grant_id = id), err(Display))]
    async fn revoke_grant(&self, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
        let (id, by) = (id.to_owned(), by.to_owned());
        self.outbox_write(move |conn| crate::grants::revoke(conn, &id, &by, at))
            .await
    }
}

#[async_trait]
impl OutboxStore for SqliteStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "claim_outbox", store = "sqlite", limit),
        err(Display)
    )]
    async fn claim_outbox(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        self.outbox_write(move |conn| crate::outbox::claim(conn, now, limit, lease))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "settle_outbox", store = "sqlite", event_id = id), err(Display))]
    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let (id, token) = (id.to_owned(), token.to_owned());
        self.outbox_write(move |conn| crate::outbox::settle(conn, &id, &token, outcome))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "settle_outbox_batch", store = "sqlite", events = settles.len()), err(Display))]
    async fn settle_outbox_batch(&self, settles: Vec<holdpoint::session::OutboxSettle>) -> Result<Vec<Result<()>>> {
        if settles.is_empty() {
            return Ok(Vec::new());
        }
        self.outbox_write(move |conn| crate::outbox::settle_batch(conn, settles))
            .await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "outbox_stats", store = "sqlite"),
        err(Display)
    )]
    async fn outbox_stats(&self, now: chrono::DateTime<chrono::Utc>) -> Result<holdpoint::session::OutboxStats> {
        self.inner
            .readers
            .run_blocking("count outbox events", move |conn| crate::endpoints::stats(conn, now))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "stop_endpoint", store = "sqlite", channel = %stop.channel), err(Display))]
    async fn stop_endpoint(&self, stop: holdpoint::session::EndpointStop) -> Result<()> {
        self.outbox_write(move |conn| crate::endpoints::stop(conn, &stop)).await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "stopped_endpoints", store = "sqlite"),
        err(Display)
    )]
    async fn stopped_endpoints(&self) -> Result<Vec<holdpoint::session::EndpointStop>> {
        self.inner
            .readers
            .run_blocking("list stopped notification endpoints", crate::endpoints::stopped)
            .await
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "enable_endpoint", store = "sqlite", channel),
        err(Display)
    )]
    async fn enable_endpoint(&self, channel: &str) -> Result<bool> {
        let channel = channel.to_owned();
        self.outbox_write(move |conn| crate::endpoints::enable(conn, &channel))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "enqueue_outbox", store = "sqlite", events = events.len()), err(Display))]
    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        // Rows enqueued by name are written whatever the handle's
        // `outbox_writes`, as the in-memory store does.
        let cols = crate::outbox::columns(&events, holdpoint::session::outbox::OutboxWrites::All)?;
        self.outbox_write(move |conn| {
            crate::outbox::insert(conn, &cols).map_err(|e| crate::error::store_error("append outbox events", e))
        })
        .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_outbox", store = "sqlite"), err(Display))]
    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        let query = query.clone();
        self.inner
            .readers
            .run_blocking("list outbox events", move |conn| crate::outbox::list(conn, &query))
            .await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "retry_outbox", store = "sqlite", event_id = id), err(Display))]
    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        let id = id.to_owned();
        self.outbox_write(move |conn| crate::outbox::retry(conn, &id)).await
    }
}

#[async_trait]
impl PruneStore for SqliteStore {
    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "prune_sessions", store = "sqlite"),
        err(Display)
    )]
    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome> {
        request.check()?;
        let request = request.clone();
        self.outbox_write(move |conn| crate::prune::step(conn, &request)).await
    }
}
