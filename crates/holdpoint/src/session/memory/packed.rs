//! A settled row kept small: the fields the store reads without decoding
//! (times, status, the claim) as they are, its session id and agent name
//! shared with the store's other rows, and the rest — the conversation
//! above all — as one JSON text.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, ErrorBody, Result};
use crate::message::{Message, Part, PartKind, metadata};
use crate::model::FinishReason;
use crate::session::HoldApproval;
use crate::session::snapshot::{Artifact, SessionState, Snapshot, SnapshotStatus};

/// A packed row. Its snapshot id is the table's key; everything else of
/// the [`Snapshot`] is here, so [`Packed::to_snapshot`] gives back the row
/// as saved (with any claim made since).
pub(super) struct Packed {
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
    pub(super) resumed_at: Option<DateTime<Utc>>,
    pub(super) resume_lease_until: Option<DateTime<Utc>>,
    pub(super) status: SnapshotStatus,
    pub(super) finish_reason: Option<FinishReason>,
    /// The session index's key.
    pub(super) session_id: Arc<str>,
    /// Shared by every row of the agent.
    pub(super) agent: Option<Arc<str>>,
    /// A [`Body`] as JSON.
    body: Box<str>,
}

/// The fields of a row that stay in JSON, borrowed from the row. The
/// state's fields are flattened into it; its session id is written only
/// when it is not the row's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BodyRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    approvals: &'a [HoldApproval],
    /// Present exactly when the row has a state.
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a [Message]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    artifacts: Option<&'a [Artifact]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    custom: Option<&'a Value>,
}

/// [`BodyRef`] decoded.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    heartbeat_at: Option<DateTime<Utc>>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    approvals: Vec<HoldApproval>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    state_session_id: Option<String>,
    #[serde(default)]
    artifacts: Vec<Artifact>,
    #[serde(default)]
    custom: Value,
}

impl Packed {
    /// `row` packed, with its session id and agent name as the store
    /// shares them; `None` when its JSON would not decode back to it (see
    /// [`decodes_back`]).
    pub(super) fn of(row: &Snapshot, session_id: Arc<str>, agent: Option<Arc<str>>) -> Option<Packed> {
        if !decodes_back(row) || *session_id != *row.session_id || agent.as_deref() != row.agent.as_deref() {
            return None;
        }
        let state = row.state.as_ref();
        let body = BodyRef {
            parent_id: row.parent_id.as_deref(),
            heartbeat_at: row.heartbeat_at,
            error: row.error.as_ref(),
            owner: row.owner.as_deref(),
            metadata: row.metadata.as_ref(),
            approvals: &row.approvals,
            messages: state.map(|s| s.messages.as_slice()),
            state_session_id: state.map(|s| s.session_id.as_str()).filter(|s| *s != row.session_id),
            artifacts: state.map(|s| s.artifacts.as_slice()).filter(|a| !a.is_empty()),
            custom: state.map(|s| &s.custom).filter(|c| !c.is_null()),
        };
        let json = serde_json::to_string(&body).ok()?;
        Some(Packed {
            created_at: row.created_at,
            updated_at: row.updated_at,
            resumed_at: row.resumed_at,
            resume_lease_until: row.resume_lease_until,
            status: row.status,
            finish_reason: row.finish_reason,
            session_id,
            agent,
            body: json.into_boxed_str(),
        })
    }

    /// The row decoded, its id `id`.
    pub(super) fn to_snapshot(&self, id: &str) -> Result<Snapshot> {
        let body: Body = serde_json::from_str(&self.body)
            .map_err(|e| Error::Internal(format!("stored snapshot {id} does not decode: {e}")))?;
        let session_id = self.session_id.to_string();
        let state = body.messages.map(|messages| SessionState {
            session_id: body.state_session_id.unwrap_or_else(|| session_id.clone()),
            messages,
            artifacts: body.artifacts,
            custom: body.custom,
        });
        Ok(Snapshot {
            snapshot_id: id.to_owned(),
            session_id,
            parent_id: body.parent_id,
            created_at: self.created_at,
            updated_at: self.updated_at,
            heartbeat_at: body.heartbeat_at,
            status: self.status,
            finish_reason: self.finish_reason,
            error: body.error,
            state,
            resumed_at: self.resumed_at,
            resume_lease_until: self.resume_lease_until,
            agent: self.agent.as_deref().map(str::to_owned),
            owner: body.owner,
            metadata: body.metadata,
            approvals: body.approvals,
        })
    }

    /// Whether the row is waiting for an answer (see
    /// [`Snapshot::is_waiting`]).
    pub(super) fn is_waiting(&self) -> bool {
        self.status == SnapshotStatus::Completed
            && self.finish_reason == Some(FinishReason::Interrupted)
            && self.resumed_at.is_none()
    }
}

/// Whether `row`'s JSON decodes to `row` again: every part's interrupt
/// markers are well formed (decoding checks them). Rows that fail this
/// stay as saved.
fn decodes_back(row: &Snapshot) -> bool {
    fn part_ok(part: &Part) -> bool {
        part.metadata.as_ref().is_none_or(|m| metadata::validate(m).is_ok())
            && match &part.kind {
                PartKind::ToolResponse(r) => r.content.as_ref().is_none_or(|c| c.iter().all(part_ok)),
                _ => true,
            }
    }
    let message_ok = |m: &Message| m.content.iter().all(part_ok);
    row.state
        .as_ref()
        .is_none_or(|s| s.messages.iter().all(message_ok) && s.artifacts.iter().all(|a| a.parts.iter().all(part_ok)))
}
