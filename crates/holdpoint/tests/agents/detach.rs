use crate::TurnResultExt;
use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, Turn};
use holdpoint::session::{InMemoryStore, SessionState, SessionStore, SessionStoreExt, Snapshot, SnapshotStatus};
use holdpoint::{FinishReason, Status};
use tokio::sync::Notify;

fn store() -> Arc<InMemoryStore> {
    Arc::new(InMemoryStore::new())
}

async fn wait_for(store: &InMemoryStore, id: &str, want: SnapshotStatus) -> Snapshot {
    for _ in 0..500 {
        let s = store.get_snapshot(id).await.unwrap().unwrap();
        if s.status == want {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("snapshot {id} never became {want:?}");
}

#[tokio::test]
async fn detach_returns_at_once_and_completes_in_the_background() {
    let release = Arc::new(Notify::new());
    let gate = Arc::clone(&release);
    let s = store();
    let agent = Agent::custom("slow", move |turn: Turn| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            turn.reply_text("finished");
            Ok(())
        }
    })
    .store(s.clone())
    .build()
    .unwrap();
    let mut input = AgentInput::text("work");
    input.detach = Some(true);
    let out = agent.run(input, AgentInit::new()).await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Detached);
    let id = out.snapshot_id.unwrap();
    assert_eq!(
        s.get_snapshot(&id).await.unwrap().unwrap().status,
        SnapshotStatus::Pending
    );
    // a pending snapshot cannot be resumed or continued
    let err = agent.connect(AgentInit::snapshot(id.clone())).await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert!(err.to_string().contains("still running"), "{err}");
    release.notify_one();
    let done = wait_for(&s, &id, SnapshotStatus::Completed).await;
    assert_eq!(done.finish_reason, Some(FinishReason::Stop));
    let messages = done.state.unwrap().messages;
    assert_eq!(messages.last().unwrap().text(), "finished");
}

#[tokio::test]
async fn abort_of_a_pending_run_ends_aborted_and_is_a_no_op_afterwards() {
    let s = store();
    let agent = Agent::custom("blocking", |_turn: Turn| async move {
        futures::future::pending::<()>().await;
        Ok(())
    })
    .store(s.clone())
    .build()
    .unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("work").unwrap();
    let out = conn.detach().await.unwrap();
    let id = out.snapshot_id.unwrap();
    assert_eq!(
        agent.abort(&id, Access::Full).await.unwrap(),
        Some(SnapshotStatus::Pending)
    );
    let row = s.get_snapshot(&id).await.unwrap().unwrap();
    assert_eq!(row.status, SnapshotStatus::Aborted);
    assert_eq!(row.finish_reason, Some(FinishReason::Aborted));
    // terminal rows: abort is a no-op that reports the status
    assert_eq!(
        agent.abort(&id, Access::Full).await.unwrap(),
        Some(SnapshotStatus::Aborted)
    );
    assert_eq!(agent.abort("no-such-id", Access::Full).await.unwrap(), None);
    // an aborted snapshot resumes (it holds the last completed state)
    assert!(agent.connect(AgentInit::snapshot(id)).await.is_ok());
}

#[tokio::test]
async fn a_late_abort_wins_over_completion() {
    let s = store();
    let release = Arc::new(Notify::new());
    let gate = Arc::clone(&release);
    let agent = Agent::custom("racy", move |turn: Turn| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            turn.reply_text("done");
            Ok(())
        }
    })
    .store(s.clone())
    .build()
    .unwrap();
    let mut input = AgentInput::text("go");
    input.detach = Some(true);
    let out = agent.run(input, AgentInit::new()).await.unwrap();
    let id = out.snapshot_id.unwrap();
    // Request the abort through the store only (as another replica would),
    // then let the turn finish: the row must still end aborted.
    assert_eq!(s.abort(&id).await.unwrap(), Some(SnapshotStatus::Pending));
    release.notify_one();
    let row = wait_for(&s, &id, SnapshotStatus::Aborted).await;
    assert_eq!(row.status, SnapshotStatus::Aborted);
}

#[tokio::test]
async fn heartbeat_keeps_a_detached_run_fresh() {
    let s = store();
    let agent = Agent::custom("blocking", |_turn: Turn| async move {
        futures::future::pending::<()>().await;
        Ok(())
    })
    .store(s.clone())
    .heartbeat(Duration::from_millis(20))
    .build()
    .unwrap();
    let mut input = AgentInput::text("go");
    input.detach = Some(true);
    let id = agent.run(input, AgentInit::new()).await.unwrap().snapshot_id.unwrap();
    let first = s.get_snapshot(&id).await.unwrap().unwrap().heartbeat_at.unwrap();
    let mut later = first;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        later = s.get_snapshot(&id).await.unwrap().unwrap().heartbeat_at.unwrap();
        if later > first {
            break;
        }
    }
    assert!(later > first, "heartbeat never advanced");
    agent.abort(&id, Access::Full).await.unwrap();
}

#[tokio::test]
async fn a_stale_pending_row_reads_as_expired_and_is_not_resumed() {
    let s = store();
    let mut row = Snapshot::new(SessionState::new("s1"));
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(chrono::Utc::now() - chrono::Duration::seconds(120));
    row.agent = Some("a".into());
    let saved = s
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap()
        .unwrap();
    let read = s.get_snapshot(&saved.snapshot_id).await.unwrap().unwrap();
    assert_eq!(read.status, SnapshotStatus::Expired);
    let agent = Agent::custom("a", |_t: Turn| async move { Ok(()) })
        .store(s.clone())
        .build()
        .unwrap();
    let err = agent.connect(AgentInit::snapshot(saved.snapshot_id)).await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert!(err.to_string().contains("in doubt"), "{err}");
}

#[tokio::test]
async fn detach_needs_a_store() {
    let agent = Agent::custom("client", |_t: Turn| async move { Ok(()) })
        .build()
        .unwrap();
    let out = agent.run(AgentInput::detach(), AgentInit::new()).await.failed();
    assert_eq!(out.finish_reason, FinishReason::Failed);
    assert_eq!(out.error.unwrap().status, Status::FailedPrecondition);
}

#[tokio::test]
async fn detached_failure_is_recorded_with_its_error() {
    let s = store();
    let agent = Agent::custom("failing", |_t: Turn| async move {
        Err(holdpoint::Error::Internal("intentional failure".into()))
    })
    .store(s.clone())
    .build()
    .unwrap();
    let mut input = AgentInput::text("go");
    input.detach = Some(true);
    let id = agent.run(input, AgentInit::new()).await.unwrap().snapshot_id.unwrap();
    let row = wait_for(&s, &id, SnapshotStatus::Failed).await;
    assert_eq!(row.finish_reason, Some(FinishReason::Failed));
    assert!(row.error.unwrap().message.contains("intentional failure"));
}
