use crate::TurnResultExt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentStreamChunk, Turn};
use holdpoint::message::metadata;
use holdpoint::{FinishReason, GenerateChunk, Role, ScriptedModel, ScriptedTurn, Status};

use crate::bank;

#[tokio::test]
async fn interrupt_reaches_the_caller_three_ways() {
    let b = bank();
    let conn = b.agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("Transfer $500 to savings").unwrap();
    let chunks: Vec<AgentStreamChunk> = conn.receive().collect().await;

    // 1. one tool-role chunk holding the interrupt parts, right before turnEnd
    let n = chunks.len();
    assert!(n >= 2, "{chunks:?}");
    let tool_chunk = chunks[n - 2]
        .model_chunk
        .as_ref()
        .expect("tool-role chunk before turnEnd");
    assert_eq!(tool_chunk.role, Some(Role::Tool));
    assert!(tool_chunk.content.iter().all(|p| p.is_interrupt()));
    assert_eq!(tool_chunk.content.len(), 1);
    // 2. turnEnd says interrupted, with the snapshot that holds it
    let end = chunks[n - 1].turn_end.as_ref().expect("turnEnd last");
    assert_eq!(end.finish_reason, FinishReason::Interrupted);
    let snap_id = end.snapshot_id.clone().expect("snapshot id on turnEnd");
    // persisted before it was announced
    let snap = b.store_snapshot(&snap_id).await;
    assert_eq!(snap.finish_reason, Some(FinishReason::Interrupted));
    // 3. the output message carries the paused request
    let out = conn.output().await.unwrap();
    let paused = out.interrupts();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].as_tool_request().unwrap().name, "transferMoney");
    assert!(paused[0].meta(metadata::INTERRUPT).is_some());
    assert_eq!(out.snapshot_id.as_deref(), Some(snap_id.as_str()));
}

impl crate::Bank {
    pub async fn store_snapshot(&self, id: &str) -> holdpoint::session::Snapshot {
        use holdpoint::session::SessionStore;
        self.store.get_snapshot(id).await.unwrap().expect("snapshot stored")
    }
}

#[tokio::test]
async fn inputs_are_processed_one_at_a_time_with_history() {
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::text("one"));
    model.push(ScriptedTurn::text("two"));
    let agent = Agent::builder("a").model(Arc::new(model.clone())).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("first").unwrap();
    conn.send_text("second").unwrap();
    let first: Vec<_> = conn.receive().collect().await;
    assert_eq!(first.iter().filter(|c| c.turn_end.is_some()).count(), 1);
    let second: Vec<_> = conn.receive().collect().await;
    assert_eq!(
        second.last().unwrap().turn_end.as_ref().unwrap().finish_reason,
        FinishReason::Stop
    );
    let out = conn.output().await.unwrap();
    assert_eq!(out.text(), "two");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let texts: Vec<String> = requests[1].messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["first", "one", "second"]);
}

#[tokio::test]
async fn sending_after_the_agent_ended_is_failed_precondition() {
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::text("hi"));
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("hello").unwrap();
    let first = conn.output().await.unwrap();
    let again = conn.output().await.unwrap();
    assert_eq!(first, again, "output() is idempotent");
    let err = conn.send_text("more").unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition);
}

#[tokio::test]
async fn a_failed_turn_ends_the_agent_with_one_turn_end() {
    let model = ScriptedModel::new("m"); // no responses: the model call fails
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("hello").unwrap();
    let chunks: Vec<_> = conn.receive().collect().await;
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].turn_start.unwrap().turn_index, 0);
    assert_eq!(chunks[1].turn_end.as_ref().unwrap().finish_reason, FinishReason::Failed);
    let out = conn.output().await.failed();
    assert_eq!(out.finish_reason, FinishReason::Failed);
    assert!(out.error.unwrap().message.contains("no response left"));
    assert_eq!(
        conn.send_text("again").unwrap_err().status(),
        Status::FailedPrecondition
    );
}

#[tokio::test]
async fn dropping_the_receive_stream_does_not_cancel() {
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::text("streamed").with_chunks(vec![GenerateChunk::new(
        Role::Model,
        vec![holdpoint::Part::text("str")],
    )]));
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("go").unwrap();
    let mut stream = conn.receive();
    let start = stream.next().await.unwrap();
    assert_eq!(start.turn_start.unwrap().turn_index, 0);
    let first = stream.next().await.unwrap();
    assert_eq!(first.model_chunk.unwrap().text(), "str");
    drop(stream);
    let out = conn.output().await.unwrap();
    assert_eq!(out.text(), "streamed");
}

/// A scripted streamed reply reaches a connection piece by piece, each
/// piece when the model sends it (the clock is tokio's paused one, so the
/// spacing is exact and no real time passes), all before the turn's end.
#[tokio::test(start_paused = true)]
async fn a_streamed_scripted_reply_arrives_chunk_by_chunk_before_the_output() {
    let delay = Duration::from_millis(40);
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::streamed_text(["Done: ", "txn-", "123"]).chunk_delay(delay));
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    let sent = tokio::time::Instant::now();
    conn.send_text("Transfer $500 to savings").unwrap();
    let mut arrived = Vec::new();
    let mut ended = false;
    let mut stream = conn.receive();
    while let Some(chunk) = stream.next().await {
        assert!(!ended, "nothing follows turnEnd");
        if let Some(mc) = &chunk.model_chunk {
            arrived.push((mc.text(), sent.elapsed()));
        }
        ended |= chunk.turn_end.is_some();
    }
    assert!(ended);
    let texts: Vec<&str> = arrived.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, ["Done: ", "txn-", "123"]);
    // Chunk i came when the model sent it, after i + 1 delays: the first
    // was read while the model had not yet sent the others.
    for (i, (_, at)) in arrived.iter().enumerate() {
        assert!(*at >= delay * (i as u32 + 1), "chunk {i} at {at:?}");
        assert!(*at < delay * (i as u32 + 2), "chunk {i} at {at:?}");
    }
    assert_eq!(conn.output().await.unwrap().text(), "Done: txn-123");
}

/// `chunked` streams any scripted turn: text in pieces, a tool request
/// as a chunk of its own, like a provider's stream.
#[tokio::test]
async fn a_chunked_turn_streams_its_text_in_pieces() {
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::text("héllo wörld").chunked(3));
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("hi").unwrap();
    let texts: Vec<String> = conn
        .receive()
        .filter_map(|c| async move { c.model_chunk.map(|m| m.text()) })
        .collect()
        .await;
    assert_eq!(texts, ["hél", "lo ", "wör", "ld"]);
    assert_eq!(conn.output().await.unwrap().text(), "héllo wörld");
}

#[tokio::test]
async fn malformed_inputs_are_rejected_before_queueing() {
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("a").model(Arc::new(model)).build().unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    let err = conn
        .send_message(holdpoint::Message::model_text("pretending to be the model"))
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    let empty_resume = AgentInput::resume(holdpoint::Resume::default());
    let err = conn.send(empty_resume).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    // An empty input is well formed: it continues the conversation.
    conn.send(AgentInput::default()).unwrap();
}

#[tokio::test]
async fn cancel_stops_a_blocked_turn_without_deadlock() {
    let agent = Agent::custom("blocked", |_turn: Turn| async move {
        futures::future::pending::<()>().await;
        Ok(())
    })
    .build()
    .unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("go").unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    conn.cancel();
    // The output resolves (with an error) rather than hanging; the timeout
    // only turns a deadlock into a failure.
    let out = tokio::time::timeout(Duration::from_secs(10), conn.output())
        .await
        .expect("output after cancel must not hang");
    assert_eq!(out.unwrap_err().status(), Status::Cancelled);
    assert_eq!(conn.send_text("more").unwrap_err().status(), Status::FailedPrecondition);
}

#[tokio::test]
async fn a_panicking_turn_fails_the_turn_not_the_process() {
    let agent = Agent::custom("panicky", |_turn: Turn| async move {
        if std::hint::black_box(true) {
            panic!("tool bug");
        }
        Ok(())
    })
    .build()
    .unwrap();
    let out = agent.run_text("go").await.failed();
    assert_eq!(out.finish_reason, FinishReason::Failed);
    let err = out.error.unwrap();
    assert_eq!(err.status, Status::Internal);
    assert!(err.message.contains("tool bug"), "{}", err.message);
}

/// A store whose writes are slow and say when they finished.
struct SlowStore {
    inner: holdpoint::session::InMemoryStore,
    written: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait::async_trait]
impl holdpoint::session::SessionStore for SlowStore {
    async fn get_snapshot(&self, id: &str) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        self.inner.get_snapshot(id).await
    }
    async fn get_latest_snapshot(&self, s: &str) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        self.inner.get_latest_snapshot(s).await
    }
    async fn save_snapshot(
        &self,
        id: Option<&str>,
        update: holdpoint::session::SnapshotUpdate,
    ) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let out = self.inner.save_snapshot(id, update).await;
        self.written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        out
    }
    async fn watch_status(
        &self,
        id: &str,
    ) -> holdpoint::Result<futures::stream::BoxStream<'static, holdpoint::session::SnapshotStatus>> {
        self.inner.watch_status(id).await
    }
    async fn insert_snapshot(
        &self,
        id: &str,
        row: holdpoint::session::Snapshot,
    ) -> holdpoint::Result<holdpoint::session::Snapshot> {
        // Through this store's own save, as every write of the test is.
        self.save_snapshot(Some(id), holdpoint::session::insert_update(id, row))
            .await?
            .ok_or_else(|| holdpoint::Error::Internal(format!("snapshot {id} was not written")))
    }
    async fn insert_snapshots(
        &self,
        rows: Vec<(String, holdpoint::session::Snapshot)>,
    ) -> holdpoint::Result<Vec<holdpoint::session::Snapshot>> {
        // One by one, through this store's own insert.
        let mut written = Vec::with_capacity(rows.len());
        for (id, row) in rows {
            written.push(self.insert_snapshot(&id, row).await?);
        }
        Ok(written)
    }
    async fn claim_resume(
        &self,
        claim: holdpoint::session::ResumeClaim,
        audit: Vec<holdpoint::session::AuditRecord>,
    ) -> holdpoint::Result<()> {
        self.inner.claim_resume(claim, audit).await
    }
    fn capabilities(&self) -> holdpoint::session::Capabilities {
        self.inner.capabilities()
    }
}

#[tokio::test]
async fn the_interrupt_is_announced_only_after_its_snapshot_is_durable() {
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let store = Arc::new(SlowStore {
        inner: holdpoint::session::InMemoryStore::new(),
        written: std::sync::Arc::clone(&written),
    });
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let model = ScriptedModel::new("m");
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        serde_json::json!({"amount": 5, "toAccount": "x"}),
    ));
    let agent = Agent::builder("slow")
        .model(Arc::new(model))
        .tool(crate::transfer_tool(runs))
        .store(store.clone())
        .build()
        .unwrap();
    let conn = agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("go").unwrap();
    let mut chunks = conn.receive();
    while let Some(chunk) = chunks.next().await {
        let announces_interrupt = chunk
            .model_chunk
            .as_ref()
            .is_some_and(|c| c.content.iter().any(|p| p.is_interrupt()));
        if announces_interrupt || chunk.turn_end.is_some() {
            assert_eq!(
                written.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "the snapshot write finished before the interrupt was announced"
            );
            if let Some(end) = &chunk.turn_end {
                use holdpoint::session::SessionStore;
                let id = end.snapshot_id.as_deref().unwrap();
                assert!(store.get_snapshot(id).await.unwrap().is_some());
            }
        }
    }
}
