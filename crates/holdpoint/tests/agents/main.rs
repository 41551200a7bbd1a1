//! Agent behaviour: connections, resume validation, exactly-once claims,
//! detach and abort, client-held state, custom agents.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod abandon;
mod approval;
mod connection;
mod detach;
mod in_doubt;
mod isolation;
mod resume;
mod state;

mod bank;

pub use bank::*;

#[test]
fn agent_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let b = bank();
    let run = b.agent.run_text("x");
    assert_send(&run);
    let connect = b.agent.connect(holdpoint::agent::AgentInit::new());
    assert_send(&connect);
    let abort = b.agent.abort("id");
    assert_send(&abort);
}
