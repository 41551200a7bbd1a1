//! Failed and aborted turns as resume points: the seam a failed prompt
//! turn keeps, the empty input that goes on from it, `turnStart` chunks,
//! `wait_for_snapshot`, and the session check of an init.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, RunOptions, Turn};
use holdpoint::session::{InMemoryStore, SessionStore, SnapshotStatus};
use holdpoint::{Error, ErrorBody, FinishReason, Message, ScriptedModel, ScriptedTurn, Status};

use crate::TurnResultExt;

fn failing_call(status: Status, message: &str) -> ScriptedTurn {
    let mut turn = ScriptedTurn::text("");
    turn.response = Err(ErrorBody {
        status,
        message: message.into(),
    });
    turn
}

#[tokio::test]
async fn a_model_failure_on_the_first_call_keeps_the_user_message_in_a_failed_snapshot() {
    let store = Arc::new(InMemoryStore::new());
    let model = ScriptedModel::new("m");
    model.reset([failing_call(Status::Unavailable, "overloaded")]);
    let agent = Agent::builder("a")
        .model(Arc::new(model.clone()))
        .store(store.clone())
        .build()
        .unwrap();
    let out = agent
        .run(AgentInput::text("hello"), AgentInit::session("s"))
        .await
        .failed();
    assert_eq!(out.error.as_ref().unwrap().status, Status::Unavailable);
    let id = out.snapshot_id.expect("the failed turn wrote a snapshot");
    let snap = agent.snapshot(&id, Access::Full).await.unwrap().unwrap();
    assert_eq!(snap.status, SnapshotStatus::Failed);
    let messages = &snap.state.as_ref().unwrap().messages;
    assert_eq!(messages, &[Message::user_text("hello")]);

    // `{}` answers the kept message; the model sees it once, and no new
    // user message joins it.
    model.reset([ScriptedTurn::text("hi")]);
    let again = agent.run(AgentInput::default(), AgentInit::session("s")).await.unwrap();
    assert_eq!(again.text(), "hi");
    let request = model.requests().pop().unwrap();
    assert_eq!(request.messages, [Message::user_text("hello")]);
    let snap = agent.latest_snapshot("s", Access::Full).await.unwrap().unwrap();
    assert_eq!(snap.parent_id.as_deref(), Some(id.as_str()));
    assert_eq!(snap.state.unwrap().messages.len(), 2);
}

#[tokio::test]
async fn an_empty_input_with_nothing_to_continue_writes_nothing() {
    let store = Arc::new(InMemoryStore::new());
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("a")
        .model(Arc::new(model.clone()))
        .store(store.clone())
        .build()
        .unwrap();
    let out = agent
        .run(AgentInput::default(), AgentInit::session("empty"))
        .await
        .failed();
    let error = out.error.unwrap();
    assert_eq!(error.status, Status::InvalidArgument);
    assert!(error.message.contains("nothing to continue"), "{}", error.message);
    assert!(model.requests().is_empty(), "the model is not called");
    assert!(store.get_latest_snapshot("empty").await.unwrap().is_none());
}

#[tokio::test]
async fn every_turn_of_a_connection_starts_with_its_index() {
    let model = ScriptedModel::new("m");
    model.reset([ScriptedTurn::text("one"), ScriptedTurn::text("two")]);
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    for (i, text) in ["a", "b"].into_iter().enumerate() {
        conn.send_text(text).unwrap();
        let chunks: Vec<_> = conn.receive().collect().await;
        let start = chunks.first().and_then(|c| c.turn_start).expect("turnStart first");
        assert_eq!(start.turn_index, u32::try_from(i).unwrap());
        assert!(chunks.last().unwrap().turn_end.is_some(), "turnEnd last");
        assert_eq!(chunks.iter().filter(|c| c.turn_start.is_some()).count(), 1);
    }
    conn.output().await.unwrap();
}

#[tokio::test]
async fn wait_for_snapshot_is_bounded_and_follows_an_abort() {
    let store = Arc::new(InMemoryStore::new());
    let agent = Agent::custom("blocking", |_turn: Turn| async move {
        futures::future::pending::<()>().await;
        Ok(())
    })
    .store(store.clone())
    .build()
    .unwrap();
    let mut input = AgentInput::text("work");
    input.detach = Some(true);
    let options = RunOptions::new(AgentInit::new()).principal("alice");
    let out = agent.run_with(input, options).await.unwrap();
    let id = out.snapshot_id.unwrap();

    let waited = agent
        .wait_for_snapshot(&id, Access::Full, Duration::from_millis(20))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited.status, SnapshotStatus::Pending, "the wait ran out first");
    assert!(
        agent
            .wait_for_snapshot(&id, Access::As(Some("bob")), Duration::from_millis(20))
            .await
            .unwrap()
            .is_none(),
        "another principal's snapshot reads as unknown"
    );
    assert!(
        agent
            .wait_for_snapshot("nope", Access::Full, Duration::from_millis(20))
            .await
            .unwrap()
            .is_none()
    );

    assert_eq!(
        agent.abort(&id, Access::Full).await.unwrap(),
        Some(SnapshotStatus::Pending)
    );
    let settled = agent
        .wait_for_snapshot(&id, Access::Full, Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, SnapshotStatus::Aborted);
    assert_eq!(settled.finish_reason, Some(FinishReason::Aborted));
}

#[tokio::test]
async fn an_init_naming_another_session_is_invalid_only_for_a_snapshot_the_caller_sees() {
    let store = Arc::new(InMemoryStore::new());
    let agent = Agent::custom("echo", |turn: Turn| async move {
        turn.reply_text("ok");
        Ok(())
    })
    .store(store.clone())
    .build()
    .unwrap();
    let alice = |init| RunOptions::new(init).principal("alice");
    let bob = |init| RunOptions::new(init).principal("bob");
    let out = agent
        .run_with(AgentInput::text("hi"), alice(AgentInit::session("alice-s")))
        .await
        .unwrap();
    let id = out.snapshot_id.unwrap();
    let init = AgentInit {
        snapshot_id: Some(id.clone()),
        session_id: Some("other".into()),
        state: None,
    };
    let mine = agent.run_with(AgentInput::text("again"), alice(init.clone())).await;
    let err = mine.unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("does not belong to session other"), "{err}");
    let theirs: Result<_, Error> = agent.run_with(AgentInput::text("again"), bob(init)).await;
    assert_eq!(theirs.unwrap_err().status(), Status::NotFound);
}
