//! One stored row of the in-memory store: as saved, or packed as its JSON
//! text once it left the window of the newest waiting rows.

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::message::{Message, Part, PartKind, metadata};
use crate::session::claim::{ResumeClaim, apply_claim_to};
use crate::session::snapshot::{Snapshot, SnapshotStatus};

/// One stored row.
pub(super) enum Stored {
    /// The row as saved.
    Live(Box<Snapshot>),
    /// A row saved waiting for an answer (still waiting, or claimed since)
    /// that left the window of the newest ([`HOT_WAITING`]), kept as its
    /// JSON text: a paused session may wait
    /// for days, and the text is a fraction of the decoded tree (one
    /// allocation instead of dozens). A claim sets `resumed_at` here,
    /// without decoding; reads decode a copy.
    Packed {
        created_at: DateTime<Utc>,
        /// The agent that wrote it, for counting without decoding.
        agent: Option<Box<str>>,
        resumed_at: Option<DateTime<Utc>>,
        resume_lease_until: Option<DateTime<Utc>>,
        json: Box<str>,
    },
}

impl Stored {
    /// Packs a live row saved waiting for an answer — still waiting, or
    /// claimed since — that decodes back to itself; leaves any other row
    /// as it is.
    pub(super) fn pack(&mut self) {
        let Stored::Live(row) = self else { return };
        let answered = row.status == SnapshotStatus::Completed && row.resumed_at.is_some();
        if !(row.is_waiting() || answered) || !decodes_back(row) {
            return;
        }
        if let Ok(json) = serde_json::to_string(row) {
            *self = Stored::Packed {
                created_at: row.created_at,
                agent: row.agent.as_deref().map(Box::from),
                resumed_at: row.resumed_at,
                resume_lease_until: row.resume_lease_until,
                json: json.into_boxed_str(),
            };
        }
    }

    pub(super) fn created_at(&self) -> DateTime<Utc> {
        match self {
            Stored::Live(row) => row.created_at,
            Stored::Packed { created_at, .. } => *created_at,
        }
    }

    /// Whether the row waits for an answer (a packed row was saved
    /// waiting; a claim since sets its `resumed_at`) and was written by
    /// `agent` when one is given.
    pub(super) fn waits_for(&self, agent: Option<&str>) -> bool {
        match self {
            Stored::Live(row) => row.is_waiting() && agent.is_none_or(|a| row.agent.as_deref() == Some(a)),
            Stored::Packed {
                agent: written_by,
                resumed_at,
                ..
            } => resumed_at.is_none() && agent.is_none_or(|a| written_by.as_deref() == Some(a)),
        }
    }

    /// The status as read now (a packed row was saved completed).
    pub(super) fn read_status(&self) -> SnapshotStatus {
        match self {
            Stored::Live(row) => row.as_read_status(),
            Stored::Packed { .. } => SnapshotStatus::Completed,
        }
    }

    /// A copy of the row.
    pub(super) fn to_snapshot(&self, id: &str) -> Result<Snapshot> {
        match self {
            Stored::Live(row) => Ok((**row).clone()),
            Stored::Packed {
                resumed_at,
                resume_lease_until,
                json,
                ..
            } => {
                let mut row: Snapshot = serde_json::from_str(json)
                    .map_err(|e| Error::Internal(format!("stored snapshot {id} does not decode: {e}")))?;
                if resumed_at.is_some() {
                    row.resumed_at = *resumed_at;
                    row.resume_lease_until = *resume_lease_until;
                }
                Ok(row)
            }
        }
    }

    /// Applies a resume's claim (the exactly-once mark, docs/reference.md §7, and its
    /// lease, §8) in place, without decoding a packed row.
    pub(super) fn claim(&mut self, claim: &ResumeClaim) -> Result<()> {
        match self {
            Stored::Live(row) => apply_claim_to(&mut row.resumed_at, &mut row.resume_lease_until, claim),
            Stored::Packed {
                resumed_at,
                resume_lease_until,
                ..
            } => apply_claim_to(resumed_at, resume_lease_until, claim),
        }
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

/// The status of a row as read now.
pub(super) trait ReadStatus {
    fn as_read_status(&self) -> SnapshotStatus;
}

impl ReadStatus for Snapshot {
    fn as_read_status(&self) -> SnapshotStatus {
        self.read_status(chrono::Utc::now())
    }
}
