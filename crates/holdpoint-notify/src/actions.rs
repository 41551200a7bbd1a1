//! What the server side does when a timer fires: deny an expired hold,
//! widen who may answer an escalated one. The notify crate cannot depend on
//! the server, so the server (or the agent) implements [`HoldActions`].

use async_trait::async_trait;
use holdpoint::agent::AgentInit;
use holdpoint::agent::{Agent, AgentInput, RunOptions};
use holdpoint::session::Snapshot;
use holdpoint::session::outbox::escalated_hold;
use holdpoint::{Error, Result, Resume};
use serde_json::json;

/// The held call a timer is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRef {
    /// The agent that holds it.
    pub agent: Option<String>,
    /// Its session.
    pub session_id: String,
    /// The snapshot that holds it.
    pub snapshot_id: String,
    /// The call's ref.
    pub reference: Option<String>,
    /// The held tool.
    pub tool: String,
}

/// What [`HoldActions::expire`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireOutcome {
    /// The hold was answered as expired (the model told, the audit says
    /// so).
    Denied,
    /// Someone answered it first: nothing to do.
    AlreadyAnswered,
}

/// The actions behind the expiry and escalation timers.
#[async_trait]
pub trait HoldActions: Send + Sync {
    /// Answers the expired hold `hold` (`on_expire = "deny"`): the held
    /// call does not run, the model is told it expired, and the audit
    /// records the expiry. Must be exactly-once through the store's resume
    /// claim, so a timer that fires twice (a lapsed lease) answers once.
    async fn expire(&self, hold: &HoldRef) -> Result<ExpireOutcome>;

    /// Lets `roles` answer `hold` too (`escalate_to`). The default does
    /// nothing beyond the notification the worker sends.
    async fn escalate(&self, hold: &HoldRef, roles: &[String]) -> Result<()> {
        let _ = (hold, roles);
        Ok(())
    }
}

/// An agent answers its own expired holds: it resumes the held snapshot
/// with a denial of the call, as its owner. Because the answer comes after
/// the hold's `expiresAt`, the resume records the decision as expired and
/// tells the model the approval expired (docs/reference.md §4.5), and the
/// resume claim makes it exactly-once.
#[async_trait]
impl HoldActions for Agent {
    async fn expire(&self, hold: &HoldRef) -> Result<ExpireOutcome> {
        let Some(store) = self.store() else {
            return Err(Error::FailedPrecondition(format!(
                "agent {} has no store: it cannot answer expired holds",
                self.name()
            )));
        };
        let Some(row) = store.get_snapshot(&hold.snapshot_id).await? else {
            return Err(Error::NotFound(format!("snapshot {} not found", hold.snapshot_id)));
        };
        if !row.is_waiting() {
            return Ok(ExpireOutcome::AlreadyAnswered);
        }
        let directive = denial(&row, hold)?;
        let mut options = RunOptions::new(AgentInit::snapshot(hold.snapshot_id.clone()));
        if let Some(owner) = &row.owner {
            options = options.principal(owner.clone());
        }
        match self
            .run_with(AgentInput::resume(Resume::from_parts([directive])), options)
            .await
        {
            Ok(_) => Ok(ExpireOutcome::Denied),
            Err(Error::AlreadyResumed(_)) => Ok(ExpireOutcome::AlreadyAnswered),
            Err(e) => Err(e),
        }
    }

    /// Records `roles` as approvers of the held call on the snapshot itself
    /// (one atomic read-modify-write of the row), so from then on every
    /// replica lists the hold to them, shows them its transcript and takes
    /// their answer; a hold answered meanwhile, or escalated already, is
    /// left as it is.
    async fn escalate(&self, hold: &HoldRef, roles: &[String]) -> Result<()> {
        let Some(store) = self.store() else {
            return Err(Error::FailedPrecondition(format!(
                "agent {} has no store: it cannot escalate holds",
                self.name()
            )));
        };
        let (reference, tool, roles) = (hold.reference.clone(), hold.tool.clone(), roles.to_vec());
        store
            .save_snapshot(
                Some(&hold.snapshot_id),
                Box::new(move |existing| {
                    Ok(existing.and_then(|row| escalated_hold(row, reference.as_deref(), &tool, &roles)))
                }),
            )
            .await?;
        Ok(())
    }
}

/// The denial of the held call `hold` names, from the snapshot that holds it.
fn denial(row: &Snapshot, hold: &HoldRef) -> Result<holdpoint::Part> {
    let part = row
        .state
        .as_ref()
        .and_then(|s| s.messages.last())
        .and_then(|m| {
            m.interrupts().find(|p| {
                p.as_tool_request()
                    .is_some_and(|r| r.name == hold.tool && r.reference == hold.reference)
            })
        })
        .ok_or_else(|| {
            Error::NotFound(format!(
                "snapshot {} holds no call of {} with that ref",
                hold.snapshot_id, hold.tool
            ))
        })?;
    part.restart(Some(json!({
        holdpoint::message::metadata::TOOL_APPROVED: false,
        "reason": "the approval expired",
    })))
}
