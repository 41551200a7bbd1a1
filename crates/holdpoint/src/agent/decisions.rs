//! The verbs of the people who decide on an agent's holds
//! (docs/reference.md §10, §11): what waits for an answer or is in doubt,
//! answering and settling it, the audit trail and standing grants. They
//! sit apart from the run verbs on [`Agent`] (run, connect, read a
//! snapshot, abort a run): a turn's code never needs them, and an inbox,
//! a CLI or an operator's script needs nothing else.
//!
//! ```
//! use std::sync::Arc;
//! use holdpoint::agent::Agent;
//! use holdpoint::session::{InMemoryStore, SnapshotQuery};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let agent = Agent::custom("quiet", |_turn| async { Ok(()) })
//!     .store(Arc::new(InMemoryStore::new()))
//!     .build()?;
//! // Nothing waits for an answer yet.
//! assert!(agent.decisions().pending(SnapshotQuery::default()).await?.is_empty());
//! # Ok::<(), holdpoint::Error>(())
//! # }).unwrap();
//! ```

use super::*;

/// The decision verbs of one agent, from [`Agent::decisions`]: cheap,
/// borrowed, built per use.
#[derive(Clone, Copy)]
pub struct Decisions<'a> {
    agent: &'a Agent,
}

impl std::fmt::Debug for Decisions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decisions").field("agent", &self.agent.name()).finish()
    }
}

impl Agent {
    /// The verbs of those who decide on this agent's holds: list what
    /// waits ([`Decisions::pending`]) or is in doubt, answer
    /// ([`Decisions::answer`]), settle, read the audit trail, list and
    /// revoke grants.
    pub fn decisions(&self) -> Decisions<'_> {
        Decisions { agent: self }
    }
}

impl<'d> Decisions<'d> {
    /// The agent these verbs decide for.
    pub fn agent(self) -> &'d Agent {
        self.agent
    }

    /// The paused calls of this agent's sessions that wait for an answer,
    /// newest first. `query.agent` is set to this agent; set `owner` to list
    /// one principal's, `session_id` for one session's.
    pub async fn pending(self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.agent.def.name.clone()),
            waiting_only: true,
            ..query
        };
        let snapshots = self.agent.require_listing()?.list_snapshots(&query).await?;
        Ok(snapshots
            .iter()
            .filter(|s| s.belongs_to(&self.agent.def.name))
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
        let query = scoped(query, access);
        if let Access::Caller { roles: [_, ..], .. } = access {
            return super::pending_page::approvers_page(self.agent, query, access).await;
        }
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
    pub async fn answer(self, answer: Answer, caller: impl AsCaller) -> Result<Answered> {
        answer::answer(self.agent, answer, caller.into_context()).await
    }

    /// Lets `roles` answer a held call too (what a rule's `escalate_after`
    /// with `escalate_to` does when its timer fires, docs/reference.md
    /// §11.3): the call `tool` / `reference` of `snapshot_id` — a hold a
    /// sub-agent surfaced named as listings show it, on the root — gets the
    /// roles as approvers on its own row and on every sub-agent level the
    /// answer goes down through, so the new approvers both see it and may
    /// answer it. A hold answered meanwhile, or escalated to these roles
    /// already, is left as it is.
    pub async fn escalate(
        self,
        snapshot_id: &str,
        reference: Option<&str>,
        tool: &str,
        roles: &[String],
    ) -> Result<()> {
        super::escalate::escalate(self.agent, snapshot_id, reference, tool, roles).await
    }

    /// Denies an expired hold as the system, not a person (what a rule's
    /// `on_expire = "deny"` does when its timer fires, docs/reference.md
    /// §11.3): the paused call `tool` (with `reference`, to tell calls
    /// apart) of `snapshot_id` — a hold a sub-agent surfaced is named as
    /// listings show it, on the root — is answered with the tool's own deny
    /// data and [`EXPIRED_REASON`](super::EXPIRED_REASON), the audit records
    /// `expire`, and the turn goes on. [`Expired::AlreadyAnswered`](super::Expired)
    /// when it was answered first; `FAILED_PRECONDITION` before its
    /// `expiresAt`, with nothing changed.
    pub async fn expire(self, snapshot_id: &str, reference: Option<&str>, tool: &str) -> Result<super::Expired> {
        super::expire::expire(self.agent, snapshot_id, reference, tool).await
    }

    /// The paused calls of this agent's sessions that are *in doubt*
    /// (docs/reference.md §8): a resume claimed them, its process stopped renewing the
    /// claim (it died mid-resume), and nothing was written after — so the
    /// resumed tools may or may not have run. They are never re-run on
    /// their own and an ordinary resume is refused (`ABORTED`); an operator
    /// settles them with [`settle`](Self::settle). Each entry has
    /// `in_doubt` set and the decisions recorded for it in `decided`.
    pub async fn in_doubt(self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.agent.def.name.clone()),
            ..query
        };
        let mut calls = PendingApproval::list_in_doubt(
            self.agent.require_listing()?.as_ref(),
            self.agent.require_audit()?.as_ref(),
            query,
        )
        .await?;
        // A new message's claim on calls it abandoned lapses only when that
        // turn's process died: its own tools may be in doubt, the abandoned
        // calls are not (they never run).
        calls.retain(|c| {
            c.agent.as_deref() == Some(self.agent.def.name.as_str())
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
        let mut calls = self.in_doubt(scoped(query, access)).await?;
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
    pub async fn settle(self, snapshot_id: &str, resume: Resume, caller: impl AsCaller) -> Result<AgentOutput> {
        settle::settle(self.agent, snapshot_id, resume, caller.into_context()).await
    }

    /// This agent's audit trail, newest first (`query.agent` is set to it).
    pub async fn audit(self, query: AuditQuery) -> Result<Vec<AuditRecord>> {
        let query = AuditQuery {
            agent: Some(self.agent.def.name.clone()),
            ..query
        };
        self.agent.require_audit()?.list_audit(&query).await
    }
}

/// `query` as wide as `access` may read before its calls are filtered:
/// every session for [`Access::Full`]; the principal's own for a caller
/// without roles; every owner for a caller with roles, who may answer
/// others' holds (each call is then checked against its rule).
fn scoped(query: SnapshotQuery, access: Access<'_>) -> SnapshotQuery {
    match access {
        Access::Full => query,
        Access::As(principal) | Access::Caller { principal, roles: [] } => SnapshotQuery {
            owner: principal.map(str::to_owned),
            ..query
        },
        Access::Caller { .. } => SnapshotQuery { owner: None, ..query },
    }
}
