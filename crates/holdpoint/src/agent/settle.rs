//! Settling calls left in doubt (docs/reference.md §8): an operator answers the
//! paused calls of a snapshot whose resume claimed them and then stopped
//! renewing its claim (its process died), so the tools may or may not
//! have run.
//!
//! Invariants: a settlement runs only on a snapshot checked to be in
//! doubt here — claimed, its lease lapsed, not abandoned by a new
//! message, and nothing written after it but the unfinished pending row
//! of its own detached resume. Its turn then takes the lapsed claim over
//! atomically (see [`TurnKind::Settle`](super::load::TurnKind)), so of two
//! settlements, or a settlement and a still-live resume, exactly one acts.

use chrono::Utc;
use serde_json::{Map, Value};

use super::io::{AgentInput, AgentOutput};
use super::load::{self, Holds};
use super::{Access, Agent, audit, principal_of};
use crate::approval::roles_of;
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::session::{AuditStore, SessionStore, Snapshot};

/// [`Decisions::settle`]: checks that `snapshot_id` is in doubt, then runs
/// `resume` on it as a settlement.
pub(super) async fn settle(
    agent: &Agent,
    snapshot_id: &str,
    resume: Resume,
    context: Map<String, Value>,
) -> Result<AgentOutput> {
    let store = agent.require_store()?;
    let principal = principal_of(&context);
    let roles = roles_of(&context);
    let access = Access::of(&context, &roles);
    let name = &agent.def.name;
    // Who may settle each call is decided on the one decision path
    // (`decide.rs`) before the claim; this read only hides what the
    // caller could not see at all.
    let snapshot = store
        .get_snapshot(snapshot_id)
        .await?
        .filter(|s| s.belongs_to(name) && access.sees_to_settle(s))
        .ok_or_else(|| Error::NotFound(format!("snapshot {snapshot_id} not found")))?;
    check_in_doubt(store.as_ref(), agent.def.capabilities.audit.as_deref(), name, &snapshot).await?;
    let input = AgentInput {
        resume: Some(resume),
        ..AgentInput::default()
    };
    input.validate()?;
    let owner = snapshot.owner.clone();
    let mut session = load::from_snapshot(snapshot, principal);
    session.holds = Holds::InDoubt;
    // The turn runs as the session's owner, the settler recorded as the
    // actor (as an approver's answer does).
    let mut run_context = context;
    if let Some(actor) = super::worker::actor_of(&run_context).map(str::to_owned) {
        run_context.insert(super::ACTOR.to_owned(), Value::String(actor));
    }
    if let Some(owner) = owner {
        run_context.insert(super::PRINCIPAL.to_owned(), Value::String(owner));
    }
    agent.drive(session, input, run_context, None).await
}

/// `FAILED_PRECONDITION`, saying why, unless `snapshot`'s calls are in
/// doubt: not abandoned by a new message, its resume's claim lapsed, and
/// its resume finished nothing after it.
async fn check_in_doubt(
    store: &dyn SessionStore,
    audit: Option<&dyn AuditStore>,
    agent: &str,
    snapshot: &Snapshot,
) -> Result<()> {
    let id = &snapshot.snapshot_id;
    if let Some(at) = audit::abandoned_at(audit, agent, &snapshot.session_id, id).await {
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} is not in doubt: a new message abandoned its paused calls at {}; they never ran",
            at.to_rfc3339()
        )));
    }
    if !snapshot.resume_lapsed(Utc::now()) {
        let why = match snapshot.resume_lease_end() {
            None => "no resume claimed it; resume it the usual way".to_owned(),
            Some(end) => format!(
                "the resume that claimed it holds its claim until {}; it is in doubt only once that lapses",
                end.to_rfc3339()
            ),
        };
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} is not in doubt: {why}"
        )));
    }
    // Its successor may be the unfinished pending row of its resume that
    // detached and then stopped renewing the claim (it died): the
    // settlement's outcome replaces that row.
    if let Some(latest) = store.get_latest_snapshot(&snapshot.session_id).await?
        && latest.snapshot_id != *id
        && !latest.is_unfinished_successor_of(id)
    {
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} is not in doubt: its resume finished (snapshot {} follows it)",
            latest.snapshot_id
        )));
    }
    Ok(())
}
