//! The paused calls of a snapshot as listings show them
//! (docs/reference.md §11.2), and how people read one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::approval::{HoldRule, ReplyShape};
use crate::error::Result;
use crate::message::{Part, Role, metadata};
use crate::review::Preview;
use crate::session::{AuditQuery, AuditRecord, AuditStore, HoldApproval, Snapshot, SnapshotListing, SnapshotQuery};

/// A paused call waiting for an answer, as listings show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The session.
    pub session_id: String,
    /// The snapshot to resume.
    pub snapshot_id: String,
    /// The principal that owns the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The tool.
    pub tool: String,
    /// The call's ref.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The call's input.
    #[serde(default)]
    pub input: Value,
    /// The interrupt data (e.g. `{"message": "Tool not in approved list: X"}`).
    #[serde(default)]
    pub interrupt: Map<String, Value>,
    /// The middleware that raised the hold (absent for a tool's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    /// Since when it waits.
    pub held_since: DateTime<Utc>,
    /// When it stops being answerable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether `expires_at` has passed.
    pub expired: bool,
    /// The paused request part itself, to build a directive from.
    pub part: Part,
    /// Whether the call is in doubt: a resume claimed it and its process
    /// died, so it may or may not have run (docs/reference.md §8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_doubt: bool,
    /// For a call in doubt: the decisions recorded when it was resumed
    /// (who approved it, when), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decided: Vec<AuditRecord>,
    /// For a hold a sub-agent surfaced: the levels from this session down
    /// to the child session it paused in, outermost first
    /// (docs/reference.md §16.2); empty for a call of this session's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<crate::agent::subagent::SubagentStep>,
    /// The approval rule that governs the call: who may answer, how many
    /// must approve (docs/reference.md §10.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<HoldRule>,
    /// The approvals recorded so far toward the rule's quorum, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<HoldApproval>,
    /// How a resumable tool's resume data says yes or no, when it declares
    /// it: `approve` / `deny` answer it without hand-written JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplyShape>,
    /// The tool's preview of what the call will do, when it made one
    /// (docs/reference.md §22.2): its `summary` is the hold's headline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Preview>,
    /// Why the call cannot be approved as is — only a denial or an edit
    /// answers it (docs/reference.md §22.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unapprovable: Option<String>,
}

impl PendingApproval {
    /// The paused calls of `snapshot` (the interrupts of its last model
    /// message), as listings show them.
    pub fn of(snapshot: &Snapshot) -> Vec<PendingApproval> {
        pending_of(snapshot)
    }

    /// The paused calls of a snapshot whose resume claim lapsed, marked in
    /// doubt, each with the decisions `trail` (its session's audit
    /// records) holds for it.
    pub fn in_doubt_of(snapshot: &Snapshot, trail: &[AuditRecord]) -> Vec<PendingApproval> {
        in_doubt_of(snapshot, trail)
    }

    /// The calls in doubt in the store of `listing` and `audit` that
    /// `query` selects (it is run with `in_doubt_only`), newest first, each
    /// with its recorded decisions.
    pub async fn list_in_doubt(
        listing: &dyn SnapshotListing,
        audit: &dyn AuditStore,
        query: SnapshotQuery,
    ) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            in_doubt_only: true,
            waiting_only: false,
            ..query
        };
        let mut out = Vec::new();
        for snapshot in listing.list_snapshots(&query).await? {
            let trail = audit
                .list_audit(&AuditQuery {
                    session_id: Some(snapshot.session_id.clone()),
                    limit: Some(1000),
                    ..AuditQuery::default()
                })
                .await?;
            out.extend(in_doubt_of(&snapshot, &trail));
        }
        Ok(out)
    }
}

/// One line for people: the tool and its input, what the hold asks, who
/// raised it, the session, snapshot and ref to answer it by, and how long
/// it has waited.
///
/// ```text
/// transferMoney {"amount":500,"toAccount":"savings"} asks {"details":"Transfer $500.00 to savings"} (held by the tool) — session s-1, snapshot p-1, ref 0, waiting 3m 12s
/// ```
impl std::fmt::Display for PendingApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_at(f, Utc::now())
    }
}

impl PendingApproval {
    /// [`Display`](std::fmt::Display) as of `now`.
    fn write_at(&self, f: &mut std::fmt::Formatter<'_>, now: DateTime<Utc>) -> std::fmt::Result {
        if let Some(p) = &self.preview {
            write!(f, "{} \"{}\" ", self.tool, p.summary)?;
        } else {
            write!(f, "{} ", self.tool)?;
        }
        write!(f, "{} asks {}", self.input, Value::Object(self.interrupt.clone()))?;
        match &self.interrupted_by {
            Some(by) => write!(f, " (held by {by})")?,
            None => f.write_str(" (held by the tool)")?,
        }
        write!(f, " — session {}, snapshot {}", self.session_id, self.snapshot_id)?;
        if let Some(reference) = &self.reference {
            write!(f, ", ref {reference}")?;
        }
        if let Some(owner) = &self.owner {
            write!(f, ", owner {owner}")?;
        }
        if let Some(rule) = &self.rule {
            write!(
                f,
                ", rule \"{}\": {} may answer",
                rule.rule,
                rule.approvers.join(" or ")
            )?;
            if !rule.self_approval {
                f.write_str(" (not the owner)")?;
            }
            if rule.quorum > 1 {
                write!(f, ", {}", self.tally())?;
            }
        }
        write!(f, ", waiting {}", age(now - self.held_since))?;
        if self.expired {
            f.write_str(", expired")?;
        } else if let Some(at) = self.expires_at {
            write!(f, ", expires in {}", age(at - now))?;
        }
        if self.in_doubt {
            f.write_str(", in doubt")?;
        }
        if let Some(why) = &self.unapprovable {
            write!(f, ", not approvable as is: {why}")?;
        }
        Ok(())
    }
}

impl PendingApproval {
    /// What is at stake, in one line: the tool's preview summary when it
    /// made one, else the line built from the (redacted) input
    /// ([`hold_summary`](crate::session::outbox::hold_summary)) — the
    /// headline of the inbox, notifications, the CLI and the protocols.
    pub fn summary(&self) -> String {
        match &self.preview {
            Some(p) if !p.summary.trim().is_empty() => p.summary.clone(),
            _ => crate::session::outbox::hold_summary(&self.tool, &self.input),
        }
    }

    /// Masks what the call's part records as redacted, in `input` and in
    /// `part` (docs/reference.md §22.1). Listings are masked already; a
    /// directive built from a masked part still answers the real call.
    pub fn redact(&mut self) {
        crate::review::Redaction::on(&self.part).mask(&mut self.input);
        crate::review::redact_part(&mut self.part);
    }

    /// How far the quorum is: `1 of 2: olga` (`0 of 2` before any).
    pub fn tally(&self) -> String {
        let quorum = self.rule.as_ref().map_or(1, |r| r.quorum);
        let who: Vec<&str> = self.approvals.iter().map(|a| a.actor.as_str()).collect();
        if who.is_empty() {
            format!("0 of {quorum}")
        } else {
            format!("{} of {quorum}: {}", who.len(), who.join(", "))
        }
    }
}

/// A duration as people read it: `42s`, `3m 12s`, `5h 2m`, `2d 3h`.
fn age(d: chrono::TimeDelta) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

impl Snapshot {
    /// The roles that approve this snapshot's paused calls: the approvers
    /// of the approval rules its listed calls are held under (those a
    /// sub-agent surfaced included; none for a child session, whose holds
    /// are listed on its root), sorted and without repeats. The SQL stores
    /// keep them in the `approvers` column for [`crate::session::Viewer`].
    pub fn hold_approvers(&self) -> Vec<String> {
        let mut roles: Vec<String> = pending_of(self)
            .into_iter()
            .filter_map(|call| call.rule)
            .flat_map(|rule| rule.approvers)
            .collect();
        roles.sort_unstable();
        roles.dedup();
        roles
    }
}

/// The paused calls of a waiting snapshot.
pub(crate) fn pending_of(snapshot: &Snapshot) -> Vec<PendingApproval> {
    let mut calls = pending_raw_of(snapshot);
    for call in &mut calls {
        call.redact();
    }
    calls
}

/// [`pending_of`] with each call's input as stored, secrets unmasked:
/// for the decision path, which builds directives from the parts, and for
/// checks that read only rules.
pub(crate) fn pending_raw_of(snapshot: &Snapshot) -> Vec<PendingApproval> {
    // Sub-agents: a child's holds are listed on the root that surfaced them.
    let linked = snapshot
        .state
        .as_ref()
        .is_some_and(|s| crate::agent::subagent::parent_link(&s.messages).is_some());
    if linked { Vec::new() } else { calls_of(snapshot) }
}

/// The paused calls of `snapshot`, whoever answers them.
fn calls_of(snapshot: &Snapshot) -> Vec<PendingApproval> {
    let Some(state) = &snapshot.state else {
        return Vec::new();
    };
    let Some(last) = state.messages.iter().rev().find(|m| m.role == Role::Model) else {
        return Vec::new();
    };
    let now = Utc::now();
    last.interrupts()
        .filter_map(|part| {
            let req = part.as_tool_request()?;
            let expires_at = part.expires_at();
            Some(PendingApproval {
                agent: snapshot.agent.clone(),
                session_id: snapshot.session_id.clone(),
                snapshot_id: snapshot.snapshot_id.clone(),
                owner: snapshot.owner.clone(),
                tool: req.name.clone(),
                reference: req.reference.clone(),
                input: req.input.clone().unwrap_or(Value::Null),
                interrupt: part.interrupt_data().unwrap_or_default(),
                interrupted_by: part.interrupted_by().map(str::to_owned),
                held_since: snapshot.created_at,
                expires_at,
                expired: expires_at.is_some_and(|t| t <= now),
                part: part.clone(),
                in_doubt: false,
                decided: Vec::new(),
                path: Vec::new(),
                rule: HoldRule::on(part),
                approvals: snapshot
                    .approvals
                    .iter()
                    .filter(|a| a.is_of(&req.name, req.reference.as_deref()))
                    .cloned()
                    .collect(),
                reply: ReplyShape::on(part),
                preview: Preview::on(part),
                unapprovable: part
                    .meta(metadata::UNAPPROVABLE)
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        // Sub-agents: a surfaced hold is listed as the child's holds.
        .flat_map(crate::agent::subagent::expand)
        .collect()
}

/// The paused calls of a snapshot whose resume claim lapsed, each with the
/// decisions `trail` (the session's audit records) holds for it.
pub(crate) fn in_doubt_of(snapshot: &Snapshot, trail: &[AuditRecord]) -> Vec<PendingApproval> {
    let mut calls = calls_of(snapshot);
    for call in &mut calls {
        call.redact();
        call.in_doubt = true;
        call.decided = trail
            .iter()
            .filter(|r| r.snapshot_id == snapshot.snapshot_id && r.tool == call.tool && r.reference == call.reference)
            .cloned()
            .collect();
    }
    calls
}

#[cfg(test)]
mod tests;
