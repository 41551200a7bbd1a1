//! What the server side does when a timer fires: deny an expired hold,
//! widen who may answer an escalated one. The notify crate cannot depend on
//! the server, so the server (or the agent) implements [`HoldActions`].

use async_trait::async_trait;
use holdpoint::Result;
use holdpoint::agent::{Agent, Expired};

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

/// An agent answers its own expired holds through its decision path
/// ([`Decisions::expire`](holdpoint::agent::Decisions::expire)): the
/// tool's own deny data (as a person's denial would be), a hold a
/// sub-agent surfaced answered on the root and routed down, the audit
/// recording the expiry and the model told (docs/reference.md §4.5); the
/// resume claim makes it exactly-once.
#[async_trait]
impl HoldActions for Agent {
    async fn expire(&self, hold: &HoldRef) -> Result<ExpireOutcome> {
        let done = self
            .decisions()
            .expire(&hold.snapshot_id, hold.reference.as_deref(), &hold.tool)
            .await?;
        Ok(match done {
            Expired::AlreadyAnswered => ExpireOutcome::AlreadyAnswered,
            _ => ExpireOutcome::Denied,
        })
    }

    /// Records `roles` as approvers of the held call on the snapshot itself
    /// (and on each sub-agent level below a surfaced hold) through
    /// [`Decisions::escalate`](holdpoint::agent::Decisions::escalate): one
    /// compare-and-set per row, so from then on every replica lists the
    /// hold to them, shows them its transcript and takes their answer; a
    /// hold answered meanwhile, or escalated already, is left as it is.
    async fn escalate(&self, hold: &HoldRef, roles: &[String]) -> Result<()> {
        self.decisions()
            .escalate(&hold.snapshot_id, hold.reference.as_deref(), &hold.tool, roles)
            .await
    }
}
