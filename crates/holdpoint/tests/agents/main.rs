//! Agent behaviour: connections, resume validation, exactly-once claims,
//! detach and abort, client-held state, custom agents.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod abandon;
mod approval;
mod approvers;
mod background;
mod caller;
mod connection;
mod detach;
mod fail_loudly;
mod grants;
mod in_doubt;
mod in_doubt_roles;
mod isolation;
mod partial_atomic;
mod pending_page;
mod readme_tool;
mod receipts;
mod resumable;
mod resume;
mod review;
mod state;
mod subagents;
mod timers;

mod bank;

pub use bank::*;

use holdpoint::agent::AgentOutput;

/// Reading a turn's result in tests.
pub trait TurnResultExt {
    /// The failed output a failed turn carries in its `Err`, checked to be
    /// [`holdpoint::Error::TurnFailed`] with the failure's status and
    /// message and a typed reason.
    fn failed(self) -> AgentOutput;
    /// The output of a turn that may have failed (a failed one as its
    /// output).
    fn settled(self) -> AgentOutput;
}

impl TurnResultExt for holdpoint::Result<AgentOutput> {
    #[track_caller]
    fn failed(self) -> AgentOutput {
        let err = self.expect_err("the turn should have failed");
        let out = err.failed_output().expect("a failed turn is TurnFailed").clone();
        assert_eq!(out.finish_reason, holdpoint::FinishReason::Failed);
        let body = out.error.as_ref().expect("a failed output has an error");
        assert_eq!(err.status(), body.status);
        assert_eq!(err.to_string(), body.message);
        assert!(out.failure.is_some(), "a failed output has a typed reason");
        out
    }

    #[track_caller]
    fn settled(self) -> AgentOutput {
        self.or_else(holdpoint::Error::into_failed_output).unwrap()
    }
}

#[test]
fn agent_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let b = bank();
    let run = b.agent.run_text("x");
    assert_send(&run);
    let connect = b.agent.connect(holdpoint::agent::AgentInit::new());
    assert_send(&connect);
    let abort = b.agent.abort("id", holdpoint::agent::Access::Full);
    assert_send(&abort);
}
