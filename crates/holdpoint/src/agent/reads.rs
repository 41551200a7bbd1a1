//! An agent's reads: snapshots, listings of paused and in-doubt calls,
//! answers, settlement, the audit trail and aborts (docs/reference.md §11).

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

    /// The paused calls of this agent's sessions that wait for an answer,
    /// newest first. `query.agent` is set to this agent; set `owner` to list
    /// one principal's, `session_id` for one session's.
    pub async fn pending(&self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.def.name.clone()),
            waiting_only: true,
            ..query
        };
        let snapshots = self.require_listing()?.list_snapshots(&query).await?;
        Ok(snapshots
            .iter()
            .filter(|s| s.belongs_to(&self.def.name))
            .flat_map(audit::pending_of)
            .collect())
    }

    /// The paused calls `access` may answer or watch, newest first: its own
    /// sessions', and for a caller with roles also those of anyone's whose
    /// approval rule names one of them (docs/reference.md §10.7). `query`
    /// narrows it as for [`pending`](Self::pending); its `owner` is
    /// ignored for a caller with roles. `access` is an [`Access`] or a
    /// `&`[`Caller`].
    pub async fn pending_for<'a>(
        &self,
        query: SnapshotQuery,
        access: impl Into<Access<'a>>,
    ) -> Result<Vec<PendingApproval>> {
        let access = access.into();
        let query = match access {
            Access::Full => query,
            Access::As(principal) | Access::Caller { principal, roles: [] } => SnapshotQuery {
                owner: principal.map(str::to_owned),
                ..query
            },
            Access::Caller { .. } => {
                return super::pending_page::approvers_page(self, SnapshotQuery { owner: None, ..query }, access).await;
            }
        };
        let mut calls = self.pending(query).await?;
        calls.retain(|c| access.sees_call(c));
        Ok(calls)
    }

    /// Answers one paused call on behalf of `caller` (its principal, roles
    /// and actor; a [`Caller`] or a request context, see [`AsCaller`]):
    /// see [`Answer`] and
    /// docs/reference.md §10.7. A call held under an approval rule is
    /// answered only by an approver (or its owner, when self-approval is
    /// on): `PERMISSION_DENIED` naming the rule otherwise, with nothing
    /// changed; a snapshot the caller may not see is `NOT_FOUND`. An
    /// approval short of the rule's quorum is recorded on the snapshot (one
    /// audit row) and answered [`Answered::Recorded`]; the approval that
    /// completes it, or any authorised denial, resumes the session as its
    /// owner, with the approver as the actor ([`Answered::Resumed`]). An
    /// expired hold cannot be approved (`FAILED_PRECONDITION`).
    pub async fn answer(&self, answer: Answer, caller: impl AsCaller) -> Result<Answered> {
        answer::answer(self, answer, caller.into_context()).await
    }

    /// The paused calls of this agent's sessions that are *in doubt*
    /// (docs/reference.md §8): a resume claimed them, its process stopped renewing the
    /// claim (it died mid-resume), and nothing was written after — so the
    /// resumed tools may or may not have run. They are never re-run on
    /// their own and an ordinary resume is refused (`ABORTED`); an operator
    /// settles them with [`settle`](Self::settle). Each entry has
    /// `in_doubt` set and the decisions recorded for it in `decided`.
    pub async fn in_doubt(&self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.def.name.clone()),
            ..query
        };
        let mut calls =
            PendingApproval::list_in_doubt(self.require_listing()?.as_ref(), self.require_audit()?.as_ref(), query)
                .await?;
        // A new message's claim on calls it abandoned lapses only when that
        // turn's process died: its own tools may be in doubt, the abandoned
        // calls are not (they never run).
        calls.retain(|c| {
            c.agent.as_deref() == Some(self.def.name.as_str())
                && !c.decided.iter().any(|r| r.decision == AuditDecision::Abandoned)
        });
        Ok(calls)
    }

    /// The calls in doubt `access` may settle, newest first
    /// (docs/reference.md §10.10): for a caller, those of its own sessions
    /// it could have answered, and of anyone's whose approval rule names
    /// one of its roles; every call for the [`OPERATOR_ROLE`]. An owner a
    /// rule excluded (self-approval off) does not see that rule's calls
    /// here, since they may not settle them. `query.owner` is ignored for
    /// a caller with roles. `access` is an [`Access`] or a `&`[`Caller`].
    pub async fn in_doubt_for<'a>(
        &self,
        query: SnapshotQuery,
        access: impl Into<Access<'a>>,
    ) -> Result<Vec<PendingApproval>> {
        let access = access.into();
        let query = match access {
            Access::Full => query,
            Access::As(principal) | Access::Caller { principal, roles: [] } => SnapshotQuery {
                owner: principal.map(str::to_owned),
                ..query
            },
            Access::Caller { .. } => SnapshotQuery { owner: None, ..query },
        };
        let mut calls = self.in_doubt(query).await?;
        calls.retain(|c| access.may_settle(c));
        Ok(calls)
    }

    /// Settles calls left in doubt (see [`in_doubt`](Self::in_doubt)) on
    /// behalf of `caller` (a [`Caller`] or a request context, see
    /// [`AsCaller`]): `resume` answers the paused
    /// calls of `snapshot_id` — `respond` with the result the operator found
    /// (the call ran), or `restart` to run it again deliberately — and the
    /// turn continues from there. The lapsed claim is taken over atomically
    /// (a second settlement, or one racing a still-live resume, fails), and
    /// the audit records are marked `settles`. A resume that was only
    /// frozen and wakes afterwards writes nothing: its turn fails with
    /// `FAILED_PRECONDITION`.
    ///
    /// Fails with `FAILED_PRECONDITION` when the snapshot is not in doubt
    /// (never resumed, its claim still held, its resume finished, or a new
    /// message abandoned its calls),
    /// `NOT_FOUND` for an unknown or foreign snapshot.
    pub async fn settle(&self, snapshot_id: &str, resume: Resume, caller: impl AsCaller) -> Result<AgentOutput> {
        settle::settle(self, snapshot_id, resume, caller.into_context()).await
    }

    /// This agent's audit trail, newest first (`query.agent` is set to it).
    pub async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>> {
        let query = AuditQuery {
            agent: Some(self.def.name.clone()),
            ..query
        };
        self.require_audit()?.list_audit(&query).await
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
