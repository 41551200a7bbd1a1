//! Audit records for a resume (docs/reference.md §11.1); the paused calls
//! as listings show them (docs/reference.md §11.2) are in `pending`.

mod pending;

pub use pending::PendingApproval;
pub(crate) use pending::{pending_of, pending_raw_of};

pub(crate) use crate::session::restart_decision;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::generate::Resume;
use crate::message::{Message, Part, Role, metadata};
use crate::session::{AuditDecision, AuditQuery, AuditRecord, AuditStore, hash_json};

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
    // Borrowed: without a replacement the held input is only hashed.
    let null = Value::Null;
    let held = req.input.as_ref().unwrap_or(&null);
    let (input_hash, mut input, mut original_input, original_input_hash) = match replacement {
        Some(new) => (hash_json(&new), Some(new), Some(held.clone()), Some(hash_json(held))),
        None => (hash_json(held), None, None, None),
    };
    // The hashes cover the real inputs; the record shows them masked
    // (docs/reference.md §22.1).
    let redaction = crate::review::Redaction::on(request);
    for shown in [&mut input, &mut original_input].into_iter().flatten() {
        redaction.mask(shown);
    }
    // A decision about a hold that could not be approved as is says why.
    let reason = match request.meta(metadata::UNAPPROVABLE).and_then(Value::as_str) {
        Some(why) => Some(match reason {
            Some(r) => format!("{r} (not approvable as is: {why})"),
            None => format!("not approvable as is: {why}"),
        }),
        None => reason,
    };
    Some(AuditRecord {
        id: crate::session::mint_id(),
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
        grant: None,
    })
}

fn matching<'a>(pending: &'a Message, name: &str, reference: Option<&str>) -> Option<&'a Part> {
    pending.content.iter().find(|p| {
        p.as_tool_request()
            .is_some_and(|r| r.name == name && r.reference.as_deref() == reference)
    })
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
    store: Option<&dyn AuditStore>,
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
    let trail = store?.list_audit(&query).await.ok()?;
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
    store: Option<&dyn AuditStore>,
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
