//! The rows of a claim's decisions (`hold.decided`, the in-doubt timer)
//! and of a partial approval, and the payload they carry, built from the
//! decisions' audit records alone.

use std::borrow::Borrow;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::event::OutboxEvent;
use super::timers::rfc3339;
use super::{HOLD_DECIDED, HOLD_IN_DOUBT, HOLD_PARTIALLY_APPROVED};
use crate::session::audit::AuditRecord;
use crate::session::snapshot::Snapshot;

/// Which decisions of a claim a row reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decisions {
    /// One decision (`hold.decided`): the claim's record at this index.
    One(usize),
    /// Every decision of the claim (`hold.in_doubt`).
    All,
}

/// The events a store writes with a resume claim carrying `audit` (the
/// decisions about the claimed snapshot's calls), claimed until
/// `lease_until`: a `hold.decided` per decision, and one `hold.in_doubt`
/// timer at `lease_until`, which the worker pushes back while the lease is
/// renewed and cancels once the resume wrote its outcome.
pub fn decided_events(snapshot_id: &str, lease_until: DateTime<Utc>, audit: &[AuditRecord]) -> Vec<OutboxEvent> {
    let Some(first) = audit.first() else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut out: Vec<OutboxEvent> = audit
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let data = decision_payload(snapshot_id, audit, Decisions::One(i)).unwrap_or(Value::Null);
            OutboxEvent::new(HOLD_DECIDED, snapshot_id, &r.session_id, r.agent.as_deref(), data, now)
        })
        .collect();
    let data = decision_payload(snapshot_id, audit, Decisions::All).unwrap_or(Value::Null);
    out.push(
        OutboxEvent::new(
            HOLD_IN_DOUBT,
            snapshot_id,
            &first.session_id,
            first.agent.as_deref(),
            data,
            lease_until,
        )
        .as_timer(),
    );
    out
}

/// The payload's `data` of a claim's row about `which` of its decisions
/// `records` (the claim's audit records, in order), the claimed snapshot
/// being `snapshot_id`: what [`decided_events`] writes, built again from
/// the same records. `None` when `records` has no such decision.
pub fn decision_payload<R: Borrow<AuditRecord>>(snapshot_id: &str, records: &[R], which: Decisions) -> Option<Value> {
    match which {
        Decisions::One(i) => {
            let r = records.get(i)?.borrow();
            Some(json!({
                "agent": r.agent,
                "sessionId": r.session_id,
                "snapshotId": r.snapshot_id,
                "ref": r.reference,
                "tool": r.tool,
                "input": r.input.clone().unwrap_or(Value::Null),
                "interrupt": Value::Null,
                "approvers": [],
                "decisions": [decision_json(r)],
            }))
        }
        Decisions::All => {
            let first = records.first()?.borrow();
            Some(json!({
                "agent": first.agent,
                "sessionId": first.session_id,
                "snapshotId": snapshot_id,
                "ref": Value::Null,
                "tool": Value::Null,
                "input": Value::Null,
                "interrupt": Value::Null,
                "approvers": [],
                "decisions": records.iter().map(|r| decision_json(r.borrow())).collect::<Vec<_>>(),
            }))
        }
    }
}

/// The event of an approval that does not yet complete a hold's quorum:
/// the hook the quorum's store path writes in the transaction that records
/// the approval. `decisions` are the approvals so far.
pub fn partial_approval_event(
    row: &Snapshot,
    reference: Option<&str>,
    tool: &str,
    decisions: &[AuditRecord],
) -> OutboxEvent {
    let data = json!({
        "agent": row.agent,
        "sessionId": row.session_id,
        "snapshotId": row.snapshot_id,
        "ref": reference,
        "tool": tool,
        "input": Value::Null,
        "interrupt": Value::Null,
        "approvers": [],
        "decisions": decisions.iter().map(decision_json).collect::<Vec<_>>(),
    });
    OutboxEvent::new(
        HOLD_PARTIALLY_APPROVED,
        &row.snapshot_id,
        &row.session_id,
        row.agent.as_deref(),
        data,
        Utc::now(),
    )
}

fn decision_json(r: &AuditRecord) -> Value {
    json!({
        "decision": r.decision.as_str(),
        "actor": r.actor,
        "principal": r.principal,
        "reason": r.reason,
        "at": rfc3339(r.at),
        "ref": r.reference,
        "tool": r.tool,
    })
}
