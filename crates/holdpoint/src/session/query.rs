//! The queries of the store's listings: which snapshots (docs/reference.md §11.2) and
//! which audit records (docs/reference.md §11.1) to list.

use super::audit::AuditRecord;
use super::snapshot::Snapshot;

/// Which audit records to list (all filters combine; newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only decisions by this principal.
    pub principal: Option<String>,
    /// At most this many (default 100).
    pub limit: Option<usize>,
}

impl AuditQuery {
    /// Whether `record` passes the filters.
    pub fn matches(&self, record: &AuditRecord) -> bool {
        self.agent.as_ref().is_none_or(|a| record.agent.as_ref() == Some(a))
            && self.session_id.as_ref().is_none_or(|s| &record.session_id == s)
            && self
                .principal
                .as_ref()
                .is_none_or(|p| record.principal.as_ref() == Some(p))
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// Which snapshots to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotQuery {
    /// Only those written by this agent.
    pub agent: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only those owned by this principal.
    pub owner: Option<String>,
    /// Only the latest snapshot of each session, when it is a completed,
    /// interrupted, not yet resumed one: the sessions waiting for an answer.
    pub waiting_only: bool,
    /// Only the latest snapshot of each session, when a resume claimed it
    /// and the claim lapsed: the sessions whose calls are in doubt
    /// (docs/reference.md §8; see [`Snapshot::resume_lapsed`](super::Snapshot::resume_lapsed)).
    /// A resume that detached and died leaves an unfinished pending row
    /// after the snapshot it claimed; that row does not count as newer (see
    /// [`Snapshot::is_unfinished_successor_of`](super::Snapshot::is_unfinished_successor_of)).
    pub in_doubt_only: bool,
    /// At most this many (default 100), newest first.
    pub limit: Option<usize>,
    /// Only rows this caller may see as an approver (docs/reference.md
    /// §10.7): rows without an owner, rows it owns, and rows with a paused
    /// call whose approval rule names one of its roles (see
    /// [`Viewer::sees_row`]). The SQL stores answer it from the `approvers`
    /// column (migration 0009), so an approver's first page is one indexed
    /// query rather than a walk of every waiting row of the agent.
    pub viewer: Option<Viewer>,
}

/// The caller a [`SnapshotQuery::viewer`] lists for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Viewer {
    /// The caller's principal (`None`: anonymous).
    pub principal: Option<String>,
    /// The caller's roles.
    pub roles: Vec<String>,
}

impl Viewer {
    /// Whether this caller may see `s` in an approver's listing: it has no
    /// owner, the caller owns it, or one of its paused calls is held under
    /// a rule naming one of the caller's roles ([`Snapshot::hold_approvers`]).
    pub fn sees_row(&self, s: &Snapshot) -> bool {
        s.owner.is_none()
            || s.owner == self.principal
            || (!self.roles.is_empty() && s.hold_approvers().iter().any(|a| self.roles.contains(a)))
    }
}

impl SnapshotQuery {
    /// Whether `snapshot` passes the row filters (not `waiting_only`'s
    /// latest-per-session rule, which needs the whole session).
    pub fn matches_row(&self, s: &Snapshot) -> bool {
        self.agent.as_ref().is_none_or(|a| s.agent.as_ref() == Some(a))
            && self.session_id.as_ref().is_none_or(|id| &s.session_id == id)
            && self.owner.as_ref().is_none_or(|o| s.owner.as_ref() == Some(o))
            && (!self.waiting_only || s.is_waiting())
            && (!self.in_doubt_only || s.resume_lapsed(chrono::Utc::now()))
            && self.viewer.as_ref().is_none_or(|v| v.sees_row(s))
    }

    /// Whether only the latest snapshot of each session may match.
    pub fn latest_only(&self) -> bool {
        self.waiting_only || self.in_doubt_only
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}
