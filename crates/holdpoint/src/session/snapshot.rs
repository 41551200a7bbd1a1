//! `Snapshot`, `SnapshotStatus`, `SessionState` and `Artifact`: what a
//! session store keeps (docs/reference.md §6).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, ErrorBody, Result};
use crate::message::{Message, Metadata, Part};
use crate::model::FinishReason;

/// How long a detached run may go without a heartbeat before its pending
/// snapshot reads as [`SnapshotStatus::Expired`].
pub const HEARTBEAT_EXPIRY: std::time::Duration = std::time::Duration::from_secs(60);

/// The id prefix of the marker rows that record one-time claims of
/// client-held state (see
/// [`Agent::with_state_claims`](crate::agent::Agent::with_state_claims)).
/// A store mints UUIDs, so only a claim writes an id with this prefix.
pub const STATE_CLAIM_PREFIX: &str = "state-claim:";

/// The longest session id accepted, in bytes.
pub const MAX_SESSION_ID_LEN: usize = 256;

/// The life-cycle state of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotStatus {
    /// A detached run is working on it.
    Pending,
    /// An abort was requested; the worker has not stopped yet.
    Aborting,
    /// The turn finished (also when it finished interrupted).
    Completed,
    /// The turn failed; `error` says why.
    Failed,
    /// The run was aborted.
    Aborted,
    /// Read-only: a pending row whose heartbeat went stale (the worker died).
    Expired,
}

impl SnapshotStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotStatus::Pending => "pending",
            SnapshotStatus::Aborting => "aborting",
            SnapshotStatus::Completed => "completed",
            SnapshotStatus::Failed => "failed",
            SnapshotStatus::Aborted => "aborted",
            SnapshotStatus::Expired => "expired",
        }
    }

    /// Completed, failed and aborted rows are settled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            SnapshotStatus::Completed | SnapshotStatus::Failed | SnapshotStatus::Aborted
        )
    }
}

/// A named output of an agent (a document, a plan, …). Artifacts replace
/// earlier ones with the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// Its name; unnamed artifacts never replace others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its content.
    pub parts: Vec<Part>,
    /// Optional metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Artifact {
    /// A named artifact holding one text part.
    pub fn text(name: impl Into<String>, text: impl Into<String>) -> Self {
        Artifact {
            name: Some(name.into()),
            parts: vec![Part::text(text)],
            metadata: None,
        }
    }
}

/// Adds `artifact` to `list`, replacing one with the same name in place.
pub fn upsert_artifact(list: &mut Vec<Artifact>, artifact: Artifact) {
    if artifact.name.is_some()
        && let Some(slot) = list.iter_mut().find(|a| a.name == artifact.name)
    {
        *slot = artifact;
        return;
    }
    list.push(artifact);
}

/// The whole state of a conversation: what a client-managed agent hands
/// back to its caller, and what a snapshot stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    /// The session's id.
    #[serde(default)]
    pub session_id: String,
    /// The history.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The artifacts, by name.
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    /// Application state of custom agents.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub custom: Value,
}

impl SessionState {
    /// An empty state for `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionState {
            session_id: session_id.into(),
            ..Default::default()
        }
    }
}

/// One saved point of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Its id (minted by the store when saved with none).
    #[serde(default)]
    pub snapshot_id: String,
    /// The session it belongs to; never changes once written.
    pub session_id: String,
    /// The snapshot this one continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// The last heartbeat of a detached run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// Its life-cycle state.
    #[serde(default = "default_status")]
    pub status: SnapshotStatus,
    /// How the turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// The conversation at this point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SessionState>,
    /// Set once, atomically, when a resume of this snapshot starts: the
    /// exactly-once guard (docs/reference.md §7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<DateTime<Utc>>,
    /// How long the resume that claimed this snapshot holds its claim: the
    /// resuming worker renews it while its tools run. A claim past this
    /// time with nothing written after it is *in doubt* (docs/reference.md §8).
    /// Absent on claims written before leases: they hold for
    /// [`HEARTBEAT_EXPIRY`] after `resumedAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_lease_until: Option<DateTime<Utc>>,
    /// The agent that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The principal that owns the session: no other principal may read,
    /// resume, abort or list it. `None` for sessions started in-process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Application metadata (the server records the owning principal here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The approvals recorded so far for its paused calls whose rule needs
    /// more than one (docs/reference.md §10.7); written only while it waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<super::HoldApproval>,
}

fn default_status() -> SnapshotStatus {
    SnapshotStatus::Completed
}

impl Snapshot {
    /// A completed snapshot of `state`, stamped now, with no id yet.
    pub fn new(state: SessionState) -> Self {
        let now = Utc::now();
        Snapshot {
            snapshot_id: String::new(),
            session_id: state.session_id.clone(),
            parent_id: None,
            created_at: now,
            updated_at: now,
            heartbeat_at: None,
            status: SnapshotStatus::Completed,
            finish_reason: None,
            error: None,
            state: Some(state),
            resumed_at: None,
            resume_lease_until: None,
            agent: None,
            owner: None,
            metadata: None,
            approvals: Vec::new(),
        }
    }

    /// The status as a reader should see it: a pending row whose heartbeat
    /// (or last update) is older than [`HEARTBEAT_EXPIRY`] reads as expired.
    pub fn read_status(&self, now: DateTime<Utc>) -> SnapshotStatus {
        if self.status == SnapshotStatus::Pending {
            let last = self.heartbeat_at.unwrap_or(self.updated_at);
            let age = now.signed_duration_since(last);
            if age.to_std().is_ok_and(|a| a > HEARTBEAT_EXPIRY) {
                return SnapshotStatus::Expired;
            }
        }
        self.status
    }

    /// Whether this row is the unfinished pending row (`pending` or
    /// `aborting`) of a detached run that continued `parent`: for a resume
    /// of `parent` whose claim lapsed, the row its process left behind when
    /// it died, which a settlement's outcome replaces.
    pub fn is_unfinished_successor_of(&self, parent: &str) -> bool {
        self.parent_id.as_deref() == Some(parent)
            && matches!(self.status, SnapshotStatus::Pending | SnapshotStatus::Aborting)
    }

    /// Whether this row is the marker of a one-time claim of client-held
    /// state (its id starts with [`STATE_CLAIM_PREFIX`], or its metadata
    /// says `stateClaim`) rather than a saved point of a conversation: it
    /// holds no history and must never be loaded as one.
    pub fn is_state_claim(&self) -> bool {
        self.snapshot_id.starts_with(STATE_CLAIM_PREFIX)
            || self
                .metadata
                .as_ref()
                .and_then(|m| m.get("stateClaim"))
                .is_some_and(|v| *v == Value::Bool(true))
    }

    /// Whether this row is a snapshot the agent named `agent` wrote: its
    /// `agent` is that name and it is not a claim marker. Every load of a
    /// snapshot or session by an agent checks this, so a row of another
    /// agent sharing the store reads as unknown (its paused calls cannot
    /// be resumed through an agent with other tools and other gates).
    ///
    /// A row without `agent` belongs to no agent. Every path that writes a
    /// snapshot stamps it (a turn's outcome, a failed turn, a detached
    /// run's pending row, a claim marker), so such a row was written by
    /// hand or imported: nothing says which agent's tools and gates its
    /// paused calls were made for, so no agent may load it. Stamp `agent`
    /// when importing rows.
    pub fn belongs_to(&self, agent: &str) -> bool {
        self.agent.as_deref() == Some(agent) && !self.is_state_claim()
    }

    /// Whether `principal` may see this snapshot: unowned snapshots are
    /// visible to everyone, owned ones only to their owner.
    pub fn visible_to(&self, principal: Option<&str>) -> bool {
        match (&self.owner, principal) {
            (None, _) => true,
            (Some(owner), Some(p)) => owner == p,
            (Some(_), None) => false,
        }
    }

    /// Whether this snapshot is waiting for an answer: completed, ended
    /// interrupted, and not yet claimed by a resume.
    pub fn is_waiting(&self) -> bool {
        self.status == SnapshotStatus::Completed
            && self.finish_reason == Some(FinishReason::Interrupted)
            && self.resumed_at.is_none()
    }

    /// When the claim of the resume of this snapshot lapses (`None` when it
    /// was never resumed).
    pub fn resume_lease_end(&self) -> Option<DateTime<Utc>> {
        let claimed = self.resumed_at?;
        Some(
            self.resume_lease_until
                .unwrap_or_else(|| lease_end(claimed, HEARTBEAT_EXPIRY)),
        )
    }

    /// Whether a resume claimed this interrupted snapshot and its claim
    /// lapsed at `now`: the resuming process stopped renewing it, so its
    /// calls may or may not have run. It is *in doubt* when, in addition,
    /// nothing was written after it (it is still its session's latest
    /// snapshot) — see [`Decisions::in_doubt`](crate::agent::Decisions::in_doubt).
    pub fn resume_lapsed(&self, now: DateTime<Utc>) -> bool {
        self.status == SnapshotStatus::Completed
            && self.finish_reason == Some(FinishReason::Interrupted)
            && self.resume_lease_end().is_some_and(|end| end <= now)
    }

    /// This snapshot with its status as a reader should see it now.
    pub fn as_read(mut self) -> Self {
        self.status = self.read_status(Utc::now());
        self
    }
}

/// Checks a session id: non-empty, at most [`MAX_SESSION_ID_LEN`] bytes, no
/// control characters.
pub fn check_session_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::InvalidArgument("sessionId must not be empty".into()));
    }
    if id.len() > MAX_SESSION_ID_LEN {
        return Err(Error::InvalidArgument(format!(
            "sessionId is {} bytes long; the limit is {MAX_SESSION_ID_LEN}",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(
            "sessionId must not contain control characters".into(),
        ));
    }
    Ok(())
}

/// The read-modify-write step of [`SessionStore::save_snapshot`](super::SessionStore::save_snapshot): it gets
/// the current row (or `None`) and returns the row to write, `None` to
/// write nothing, or an error that aborts the save with nothing written.
pub type SnapshotUpdate = Box<dyn FnOnce(Option<&Snapshot>) -> Result<Option<Snapshot>> + Send>;

/// `now + lease`, saturating.
pub fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(lease)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_pending_reads_as_expired() {
        let mut s = Snapshot::new(SessionState::new("s"));
        s.status = SnapshotStatus::Pending;
        let now = Utc::now();
        assert_eq!(s.read_status(now), SnapshotStatus::Pending);
        s.heartbeat_at = Some(now - chrono::Duration::seconds(61));
        assert_eq!(s.read_status(now), SnapshotStatus::Expired);
        s.status = SnapshotStatus::Completed;
        assert_eq!(s.read_status(now), SnapshotStatus::Completed);
    }

    #[test]
    fn artifacts_replace_by_name() {
        let mut list = Vec::new();
        upsert_artifact(&mut list, Artifact::text("a", "1"));
        upsert_artifact(&mut list, Artifact::text("b", "x"));
        upsert_artifact(&mut list, Artifact::text("a", "2"));
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], Artifact::text("a", "2"));
    }

    #[test]
    fn session_id_rules() {
        assert!(check_session_id("my-app-session-123").is_ok());
        assert!(check_session_id("").is_err());
        assert!(check_session_id("a\nb").is_err());
        assert!(check_session_id(&"x".repeat(300)).is_err());
    }
}
