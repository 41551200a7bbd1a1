//! An expired hold answered by the system (`on_expire = "deny"`,
//! docs/reference.md §11.3): the same decision path as a person's denial
//! ([`answer`](super::answer)) — find the call, build the tool's own deny
//! data, resume through the claim — without the approver check, since no
//! person answers.
//!
//! Invariants: the call is found where listings show it (a hold a
//! sub-agent surfaced is answered on the root, routed down by the resume);
//! a hold that is not yet past its `expiresAt` is refused and left as it
//! is; the resume claim makes a timer that fires twice answer once.

use serde_json::{Map, Value};

use super::answer::{Answer, directive, find_call};
use super::{ACTOR, Access, Agent, PRINCIPAL, load};
use crate::error::{Error, Result};
use crate::generate::Resume;

/// The reason an expiry's denial gives the model and the audit.
pub const EXPIRED_REASON: &str = "the approval expired";

/// The `actor` an expiry's audit record names: the rule's timer acted, not
/// the session's owner (who stays its `principal`, on whose behalf the turn
/// goes on).
pub const EXPIRY_ACTOR: &str = "holdpoint:expiry";

/// What [`Decisions::expire`](super::Decisions::expire) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expired {
    /// The hold was denied as expired and its turn went on.
    Denied,
    /// Someone answered it first: nothing was done.
    AlreadyAnswered,
}

/// Denies the expired paused call `reference`/`tool` of `snapshot_id`.
pub(super) async fn expire(agent: &Agent, snapshot_id: &str, reference: Option<&str>, tool: &str) -> Result<Expired> {
    let store = agent.require_store()?;
    let answer = Answer {
        reference: reference.map(str::to_owned),
        tool: Some(tool.to_owned()),
        ..Answer::deny(snapshot_id, Some(EXPIRED_REASON))
    };
    let (snapshot, call) = match find_call(agent, store.as_ref(), &answer, Access::Full).await {
        Ok(found) => found,
        Err(Error::AlreadyResumed(_) | Error::AlreadyAnswered(_)) => return Ok(Expired::AlreadyAnswered),
        Err(e) => return Err(e),
    };
    if !call.expired {
        return Err(Error::FailedPrecondition(format!(
            "the hold of {tool} in snapshot {snapshot_id} has not expired yet"
        )));
    }
    let directive = directive(&answer, &call, Some(EXPIRED_REASON))?;
    let owner = snapshot.owner.clone();
    let mut session = load::loaded(&agent.def, snapshot, owner.as_deref())?;
    session.by_timer = true;
    let mut context = Map::new();
    if let Some(owner) = owner {
        context.insert(PRINCIPAL.to_owned(), Value::String(owner));
    }
    context.insert(ACTOR.to_owned(), Value::String(EXPIRY_ACTOR.to_owned()));
    let input = super::AgentInput::resume(Resume::from_parts(vec![directive]));
    match agent.drive(session, input, context, None).await {
        Ok(_) => Ok(Expired::Denied),
        Err(Error::AlreadyResumed(_) | Error::AlreadyAnswered(_)) => Ok(Expired::AlreadyAnswered),
        Err(e) => Err(e),
    }
}
