//! The hooks the turn pipeline calls where runs nested in a turn's tool
//! calls take part (foreground sub-agents, docs/reference.md §16): answers
//! routed down before anything checks them, the levels below checked
//! before the claim, what lies below an abandoned call abandoned after it,
//! and whether a turn collects the rows nested runs hand up
//! ([`handoff`](super::handoff)).
//!
//! The pipeline (`decide`, `worker`) calls only these, at fixed points,
//! and knows nothing else of what runs below it; `subagent` implements
//! them. Invariant of every implementation: the check hooks only read, so
//! a refused answer leaves every level as it was.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::AgentDef;
use super::decide::{Decider, Level};
use crate::error::Result;
use crate::generate::Resume;
use crate::message::Message;
use crate::session::{SessionStore, Snapshot};

/// What runs nested in a turn's tool calls adds to the turn pipeline.
#[async_trait]
pub(crate) trait Nesting: Send + Sync {
    /// Before anything checks or claims `resume`: answers addressed to
    /// holds surfaced from below (compound refs) become restarts of the
    /// calls of `history`'s last model message that surfaced them.
    fn route(&self, history: &[Message], resume: &mut Resume) -> Result<()>;

    /// Whether this run was started by its parent's call resuming it (the
    /// parent checked its answers and the snapshot it starts from).
    fn resumed_by_parent(&self, context: &Map<String, Value>) -> bool;

    /// Refuses answers given to a session whose holds are answered at a
    /// level above (`settles`: a settlement of calls in doubt, which is
    /// the operator's at any level).
    fn check_direct(&self, messages: &[Message], settles: bool, context: &Map<String, Value>) -> Result<()>;

    /// Checks, level by level, the nested answers of `resume` against the
    /// paused snapshots below `level`, with `decider`'s rights; the
    /// snapshots read go to `read` (the resumes below start from them).
    /// `caller`: the snapshot or session the caller named, which refusals
    /// name first. Reads only.
    async fn check_below(
        &self,
        store: &dyn SessionStore,
        level: &Level<'_>,
        resume: &Resume,
        decider: &Decider<'_>,
        caller: &str,
        read: &mut Vec<Snapshot>,
    ) -> Result<()>;

    /// After a claim that abandoned the paused calls of `history`'s last
    /// model message: what runs below them is abandoned too (best effort;
    /// the calls are abandoned either way).
    async fn abandon_below(
        &self,
        store: &dyn SessionStore,
        history: &[Message],
        context: &Map<String, Value>,
        lease: Duration,
    );

    /// Whether turns of `def` collect rows handed up from below.
    fn collects(&self, def: &AgentDef) -> bool;
}
