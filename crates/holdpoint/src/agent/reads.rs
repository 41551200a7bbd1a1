//! An agent's run-side reads (docs/reference.md §11): its snapshots as a
//! caller may see them, and aborting a detached run. What waits for an
//! answer, answering it and the audit trail are [`Decisions`](super::Decisions).

use super::*;

impl Agent {
    /// A stored snapshot of this agent by id, as `access` may see it:
    /// `None` for an unknown id, for a row this agent did not write
    /// (another agent's of a shared store, one without `agent`, a claim
    /// marker; see [`Snapshot::belongs_to`]), and under [`Access::As`] for
    /// another principal's (so ids cannot be probed). `access` is an
    /// [`Access`] or a `&`[`Caller`].
    pub async fn snapshot<'a>(&self, snapshot_id: &str, access: impl Into<Access<'a>>) -> Result<Option<Snapshot>> {
        let access = access.into();
        Ok(self
            .require_store()?
            .get_snapshot(snapshot_id)
            .await?
            .filter(|s| s.belongs_to(&self.def.name) && access.sees(s)))
    }

    /// The latest snapshot of a session of this agent, as `access` may see
    /// it: `None` for an unknown session and when its latest row is not
    /// this agent's or not visible (see [`snapshot`](Self::snapshot)).
    /// `access` is an [`Access`] or a `&`[`Caller`]: what a server passes
    /// for its caller. In process, [`latest`](Self::latest) says the same
    /// with [`Access::Full`].
    pub async fn latest_snapshot<'a>(
        &self,
        session_id: &str,
        access: impl Into<Access<'a>>,
    ) -> Result<Option<Snapshot>> {
        let access = access.into();
        Ok(self
            .require_store()?
            .get_latest_snapshot(session_id)
            .await?
            .filter(|s| s.belongs_to(&self.def.name) && access.sees(s)))
    }

    /// The latest snapshot of a session of this agent, read by the agent's
    /// own process (every snapshot it wrote, whoever owns it):
    /// [`latest_snapshot`](Self::latest_snapshot) with [`Access::Full`].
    /// `None` for an unknown session and when its latest row is not this
    /// agent's.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use holdpoint::agent::{Agent, Turn};
    /// use holdpoint::session::InMemoryStore;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let echo = Agent::custom("echo", |turn: Turn| async move {
    ///     turn.reply_text("hi");
    ///     Ok(())
    /// })
    /// .store(Arc::new(InMemoryStore::new()))
    /// .build()?;
    /// let out = echo.run_text("hello").await?;
    /// let latest = echo.latest(&out.session_id).await?.expect("the session's snapshot");
    /// assert_eq!(Some(latest.snapshot_id), out.snapshot_id);
    /// assert!(echo.latest("no-such-session").await?.is_none());
    /// # Ok::<(), holdpoint::Error>(())
    /// # }).unwrap();
    /// ```
    #[doc(alias = "latest_snapshot")]
    pub async fn latest(&self, session_id: &str) -> Result<Option<Snapshot>> {
        self.latest_snapshot(session_id, Access::Full).await
    }

    /// Aborts a detached run. Returns the status the snapshot had (`None`
    /// for an unknown id, and for a row `access` may not see: see
    /// [`snapshot`](Self::snapshot)). For a pending run it waits briefly
    /// for the worker to settle the row as `aborted`. `access` is an
    /// [`Access`] or a `&`[`Caller`].
    pub async fn abort<'a>(&self, snapshot_id: &str, access: impl Into<Access<'a>>) -> Result<Option<SnapshotStatus>> {
        let access = access.into();
        let owned = self.snapshot(snapshot_id, access).await?.filter(|s| access.owns(s));
        if owned.is_none() {
            return Ok(None);
        }
        self.abort_checked(snapshot_id).await
    }

    /// [`abort`](Self::abort) of a snapshot already checked to be this
    /// agent's (a row's agent never changes once written).
    async fn abort_checked(&self, snapshot_id: &str) -> Result<Option<SnapshotStatus>> {
        let store = self.require_store()?;
        let previous = store.abort(snapshot_id).await?;
        if previous == Some(SnapshotStatus::Pending) {
            let mut statuses = store.watch_status(snapshot_id).await?;
            let settle = async {
                while let Some(status) = statuses.next().await {
                    if status.is_terminal() {
                        break;
                    }
                }
            };
            if tokio::time::timeout(self.def.abort_wait, settle).await.is_err() {
                tracing::warn!(snapshot_id, "abort requested; the run has not settled yet");
            }
        }
        Ok(previous)
    }
}
