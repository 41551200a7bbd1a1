//! Audit records for a resume (docs/reference.md §11.1) and pending-approval listings
//! (docs/reference.md §11.2).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::approval::{HoldRule, ReplyShape};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::{Message, Part, Role, metadata};
use crate::session::{
    AuditDecision, AuditQuery, AuditRecord, HoldApproval, SessionStore, Snapshot, SnapshotQuery, hash_json,
};

pub use crate::message::metadata::TOOL_APPROVED;

/// Context for the records of one resume.
pub(crate) struct AuditContext<'a> {
    pub principal: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub agent: &'a str,
    pub session_id: &'a str,
    pub snapshot_id: &'a str,
}

/// The record of a decision about the paused `request`; `replacement` is
/// the new input of a restart that replaced the request's input.
fn record(
    ctx: &AuditContext<'_>,
    request: &Part,
    decision: AuditDecision,
    reason: Option<String>,
    replacement: Option<Value>,
) -> Option<AuditRecord> {
    let req = request.as_tool_request()?;
    let held = req.input.clone().unwrap_or(Value::Null);
    let (input_hash, input, original_input, original_input_hash) = match replacement {
        Some(new) => (hash_json(&new), Some(new), Some(held.clone()), Some(hash_json(&held))),
        None => (hash_json(&held), None, None, None),
    };
    Some(AuditRecord {
        id: uuid::Uuid::new_v4().to_string(),
        at: Utc::now(),
        principal: ctx.principal.map(str::to_owned),
        actor: ctx.actor.map(str::to_owned),
        agent: Some(ctx.agent.to_owned()),
        session_id: ctx.session_id.to_owned(),
        snapshot_id: ctx.snapshot_id.to_owned(),
        tool: req.name.clone(),
        reference: req.reference.clone(),
        input_hash,
        input,
        original_input,
        original_input_hash,
        decision,
        reason,
        held_by: request.interrupted_by().map(str::to_owned),
        settles: false,
        mcp: None,
    })
}

fn matching<'a>(pending: &'a Message, name: &str, reference: Option<&str>) -> Option<&'a Part> {
    pending.content.iter().find(|p| {
        p.as_tool_request()
            .is_some_and(|r| r.name == name && r.reference.as_deref() == reference)
    })
}

/// What the restart directive `d` decides about the paused `target`, and
/// the reason it gives: `expired` past the hold's `expiresAt`; `edit` when
/// it replaced the input (neither input is approved by it: a gate holds
/// the revised call again); `approve` / `deny` by the tool's declared
/// [`ReplyShape`] or a gate's `toolApproved`; else `restart`.
pub(crate) fn restart_decision(target: &Part, d: &Part, now: DateTime<Utc>) -> (AuditDecision, Option<String>) {
    let data = metadata::marker(d.metadata.as_ref(), metadata::RESUMED)
        .ok()
        .flatten()
        .map(metadata::Marker::into_object)
        .unwrap_or_default();
    let reason = data.get("reason").and_then(Value::as_str).map(str::to_owned);
    if target.expires_at().is_some_and(|t| t <= now) {
        return (AuditDecision::Expired, reason);
    }
    if d.meta(metadata::REPLACED_INPUT).is_some() {
        return (AuditDecision::Edit, reason);
    }
    if let Some((yes, why)) = ReplyShape::on(target).and_then(|shape| shape.read(&data)) {
        let decision = if yes {
            AuditDecision::Approve
        } else {
            AuditDecision::Deny
        };
        return (decision, why);
    }
    if target.interrupted_by().is_some() || data.contains_key(TOOL_APPROVED) {
        let decision = if data.get(TOOL_APPROVED) == Some(&Value::Bool(true)) {
            AuditDecision::Approve
        } else {
            AuditDecision::Deny
        };
        return (decision, reason);
    }
    (AuditDecision::Restart, reason)
}

/// The paused request of the last model message in `history` that the
/// directive `d` (a restart or a respond) answers.
pub(crate) fn target_of<'a>(history: &'a [Message], d: &Part) -> Option<&'a Part> {
    let pending = history.iter().rev().find(|m| m.role == Role::Model)?;
    let (name, reference) = match (d.as_tool_request(), d.as_tool_response()) {
        (Some(r), _) => (&r.name, r.reference.as_deref()),
        (None, Some(r)) => (&r.name, r.reference.as_deref()),
        (None, None) => return None,
    };
    matching(pending, name, reference)
}

/// One record per directive of a validated resume.
pub(crate) fn records(ctx: &AuditContext<'_>, history: &[Message], resume: &Resume) -> Vec<AuditRecord> {
    let Some(pending) = history.iter().rev().find(|m| m.role == Role::Model) else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut out = Vec::new();
    for d in &resume.restart {
        let Some(req) = d.as_tool_request() else { continue };
        let Some(target) = matching(pending, &req.name, req.reference.as_deref()) else {
            continue;
        };
        // The input the restart runs with when it replaced the held one (a
        // request without input runs with `{}`, as the resume runs it).
        let replacement = d
            .meta(metadata::REPLACED_INPUT)
            .map(|_| req.input.clone().unwrap_or_else(|| Value::Object(Map::new())));
        let (decision, reason) = restart_decision(target, d, now);
        out.extend(record(ctx, target, decision, reason, replacement));
    }
    for d in &resume.respond {
        let Some(resp) = d.as_tool_response() else { continue };
        let Some(target) = matching(pending, &resp.name, resp.reference.as_deref()) else {
            continue;
        };
        let reason = d
            .meta(metadata::INTERRUPT_RESPONSE)
            .and_then(|v| v.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let decision = if target.expires_at().is_some_and(|t| t <= now) {
            AuditDecision::Expired
        } else {
            AuditDecision::Respond
        };
        out.extend(record(ctx, target, decision, reason, None));
    }
    out
}

/// The `approve` record of an approval short of its rule's quorum.
pub(crate) fn partial_approval(ctx: &AuditContext<'_>, part: &Part, reason: Option<String>) -> Option<AuditRecord> {
    record(ctx, part, AuditDecision::Approve, reason, None)
}

/// One `abandon` record per paused call of the last model message in
/// `history`: a new message continues the session instead of answering.
pub(crate) fn abandoned(ctx: &AuditContext<'_>, history: &[Message]) -> Vec<AuditRecord> {
    let Some(pending) = history.iter().rev().find(|m| m.role == Role::Model) else {
        return Vec::new();
    };
    pending
        .interrupts()
        .filter_map(|part| record(ctx, part, AuditDecision::Abandoned, None, None))
        .collect()
}

/// When a new message abandoned the paused calls of `snapshot_id` (the
/// time of its `abandon` records), if it did. A store without an audit
/// trail answers `None`.
pub(crate) async fn abandoned_at(
    store: &dyn SessionStore,
    agent: &str,
    session_id: &str,
    snapshot_id: &str,
) -> Option<DateTime<Utc>> {
    let query = AuditQuery {
        agent: Some(agent.to_owned()),
        session_id: Some(session_id.to_owned()),
        limit: Some(1000),
        ..AuditQuery::default()
    };
    let trail = store.list_audit(&query).await.ok()?;
    trail
        .iter()
        .filter(|r| r.snapshot_id == snapshot_id && r.decision == AuditDecision::Abandoned)
        .map(|r| r.at)
        .min()
}

/// The error for a claim on `snapshot_id` that `store` refused with
/// `refused`: when that snapshot's calls were abandoned by a new message,
/// `ABORTED` saying so (and when); otherwise `refused` itself.
pub(crate) async fn explain_refused(
    store: &dyn SessionStore,
    agent: &str,
    session_id: &str,
    snapshot_id: &str,
    refused: Error,
) -> Error {
    if !matches!(refused, Error::AlreadyResumed(_)) {
        return refused;
    }
    match abandoned_at(store, agent, session_id, snapshot_id).await {
        Some(at) => Error::Abandoned(format!(
            "snapshot {snapshot_id} was abandoned by a new message at {}: its paused calls were not run and can no longer be answered",
            at.to_rfc3339()
        )),
        None => refused,
    }
}

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
    pub path: Vec<super::subagent::SubagentStep>,
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

    /// The calls in doubt in `store` that `query` selects (it is run with
    /// `in_doubt_only`), newest first, each with its recorded decisions.
    pub async fn list_in_doubt(store: &dyn SessionStore, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            in_doubt_only: true,
            waiting_only: false,
            ..query
        };
        let mut out = Vec::new();
        for snapshot in store.list_snapshots(&query).await? {
            let trail = store
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
        write!(
            f,
            "{} {} asks {}",
            self.tool,
            self.input,
            Value::Object(self.interrupt.clone())
        )?;
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
        Ok(())
    }
}

impl PendingApproval {
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

/// The paused calls of a waiting snapshot.
pub(crate) fn pending_of(snapshot: &Snapshot) -> Vec<PendingApproval> {
    // Sub-agents: a child's holds are listed on the root that surfaced them.
    let linked = snapshot
        .state
        .as_ref()
        .is_some_and(|s| super::subagent::parent_link(&s.messages).is_some());
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
            })
        })
        // Sub-agents: a surfaced hold is listed as the child's holds.
        .flat_map(super::subagent::expand)
        .collect()
}

/// The paused calls of a snapshot whose resume claim lapsed, each with the
/// decisions `trail` (the session's audit records) holds for it.
pub(crate) fn in_doubt_of(snapshot: &Snapshot, trail: &[AuditRecord]) -> Vec<PendingApproval> {
    let mut calls = calls_of(snapshot);
    for call in &mut calls {
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
mod tests {
    use serde_json::json;

    use super::*;

    struct At<'a>(&'a PendingApproval, DateTime<Utc>);

    impl std::fmt::Display for At<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.write_at(f, self.1)
        }
    }

    fn transfer() -> PendingApproval {
        let held = DateTime::parse_from_rfc3339("2026-01-02T15:04:05Z").unwrap().to_utc();
        let mut part = Part::tool_request("transferMoney", Some("0".into()), Some(json!({"amount": 500})));
        part.set_meta(metadata::INTERRUPT, json!({"details": "Transfer $500.00 to savings"}));
        PendingApproval {
            agent: Some("bankingAgent".into()),
            session_id: "s-1".into(),
            snapshot_id: "p-1".into(),
            owner: None,
            tool: "transferMoney".into(),
            reference: Some("0".into()),
            input: json!({"amount": 500}),
            interrupt: part.interrupt_data().unwrap(),
            interrupted_by: None,
            held_since: held,
            expires_at: None,
            expired: false,
            part,
            in_doubt: false,
            decided: Vec::new(),
            path: Vec::new(),
            rule: None,
            approvals: Vec::new(),
            reply: None,
        }
    }

    #[test]
    fn display_names_the_call_what_it_asks_where_it_waits_and_since_when() {
        let p = transfer();
        let now = p.held_since + chrono::TimeDelta::seconds(192);
        assert_eq!(
            At(&p, now).to_string(),
            r#"transferMoney {"amount":500} asks {"details":"Transfer $500.00 to savings"} (held by the tool) — session s-1, snapshot p-1, ref 0, waiting 3m 12s"#
        );
        let held = PendingApproval {
            interrupted_by: Some("toolApproval".into()),
            owner: Some("alice".into()),
            expires_at: Some(p.held_since + chrono::TimeDelta::hours(24)),
            ..transfer()
        };
        let later = p.held_since + chrono::TimeDelta::hours(2);
        let text = At(&held, later).to_string();
        assert!(text.contains("(held by toolApproval)"), "{text}");
        assert!(
            text.ends_with(", owner alice, waiting 2h 0m, expires in 22h 0m"),
            "{text}"
        );
        let gone = PendingApproval {
            expired: true,
            in_doubt: true,
            ..held
        };
        assert!(
            At(&gone, later)
                .to_string()
                .ends_with("waiting 2h 0m, expired, in doubt")
        );
    }

    #[test]
    fn ages_read_in_the_largest_units() {
        let s = chrono::TimeDelta::seconds;
        assert_eq!(age(s(-5)), "0s");
        assert_eq!(age(s(59)), "59s");
        assert_eq!(age(s(3599)), "59m 59s");
        assert_eq!(age(s(86_399)), "23h 59m");
        assert_eq!(age(s(2 * 86_400 + 3 * 3600)), "2d 3h");
    }
}
