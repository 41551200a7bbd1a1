//! A new user message on a session whose latest turn paused abandons the
//! paused calls: it claims the paused snapshot (the claim a resume makes,
//! so of the message and a concurrent approval exactly one wins), records
//! an `abandoned` decision per call, and a later approval of that snapshot
//! is refused `ABORTED` without running anything or writing anything.

use crate::TurnResultExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::session::{
    AuditDecision, AuditQuery, AuditRecord, InMemoryStore, ResumeClaim, SessionStore, Snapshot, SnapshotQuery,
    SnapshotStatus, SnapshotUpdate,
};
use holdpoint::{FinishReason, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::json;

use crate::{TransferTool, approve, transfer_tool};

struct Teller {
    agent: Agent,
    model: ScriptedModel,
    tool: TransferTool,
    runs: Arc<AtomicUsize>,
    store: Arc<dyn SessionStore>,
}

fn teller(store: Arc<dyn SessionStore>) -> Teller {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    Teller {
        agent,
        model,
        tool,
        runs,
        store,
    }
}

async fn sqlite() -> (tempfile::TempDir, Arc<dyn SessionStore>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("abandon.db").display());
    let store = holdpoint_stores::open_store(&url).await.unwrap();
    (dir, store)
}

impl Teller {
    async fn pause(&self, init: AgentInit) -> AgentOutput {
        self.model.push(ScriptedTurn::tool_call(
            "transferMoney",
            json!({"amount": 500, "toAccount": "savings"}),
        ));
        let out = self.agent.run(AgentInput::text("Transfer $500"), init).await.unwrap();
        assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
        out
    }

    fn approval(&self, paused: &AgentOutput) -> AgentInput {
        AgentInput::resume(Resume::from_parts([approve(&self.tool, paused)]))
    }

    async fn rows(&self) -> Vec<Snapshot> {
        let query = SnapshotQuery {
            limit: Some(1000),
            ..SnapshotQuery::default()
        };
        self.store
            .capabilities()
            .listing()
            .unwrap()
            .list_snapshots(&query)
            .await
            .unwrap()
    }

    async fn audit_of(&self, snapshot_id: &str) -> Vec<AuditRecord> {
        let query = AuditQuery {
            limit: Some(1000),
            ..AuditQuery::default()
        };
        let mut trail = self
            .store
            .capabilities()
            .audit()
            .unwrap()
            .list_audit(&query)
            .await
            .unwrap();
        trail.retain(|r| r.snapshot_id == snapshot_id);
        trail
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn assert_abandoned_refusal(out: &AgentOutput) {
    assert_eq!(out.finish_reason, FinishReason::Failed, "{out:?}");
    let err = out.error.as_ref().unwrap();
    assert_eq!(err.status, Status::Aborted, "{err:?}");
    assert!(err.message.contains("abandoned by a new message at"), "{}", err.message);
}

async fn late_approval_of_an_abandoned_hold_is_refused(store: Arc<dyn SessionStore>) {
    let t = teller(store);
    let paused = t.pause(AgentInit::new()).await;
    let snap = paused.snapshot_id.clone().unwrap();
    assert_eq!(
        t.agent
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );

    t.model.push(ScriptedTurn::text("Sure, something else."));
    let chat = t
        .agent
        .run(
            AgentInput::text("never mind, what's my balance?"),
            AgentInit::session(&paused.session_id),
        )
        .await
        .unwrap();
    assert_eq!(chat.finish_reason, FinishReason::Stop, "{chat:?}");
    assert!(
        t.agent
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    let trail = t.audit_of(&snap).await;
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0].decision, AuditDecision::Abandoned);
    assert_eq!(trail[0].tool, "transferMoney");
    assert_eq!(trail[0].agent.as_deref(), Some("bank"));
    let chat_row = t
        .agent
        .snapshot(chat.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(chat_row.parent_id.as_deref(), Some(snap.as_str()));

    // The approval arrives late, by the snapshot's id: refused, and
    // nothing runs or is written.
    let before = t.rows().await;
    t.model.push(ScriptedTurn::text("Transferred."));
    let late = t
        .agent
        .run(t.approval(&paused), AgentInit::snapshot(&snap))
        .await
        .failed();
    assert_abandoned_refusal(&late);
    assert_eq!(t.runs(), 0, "the abandoned transfer never ran");
    assert_eq!(t.rows().await, before, "nothing was written");
    assert_eq!(t.audit_of(&snap).await.len(), 1);
    let latest = t
        .agent
        .latest_snapshot(&paused.session_id, Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.snapshot_id, chat.snapshot_id.unwrap());
    // Nor can an operator "settle" it: it is not in doubt.
    let settled = t
        .agent
        .decisions()
        .settle(&snap, t.approval(&paused).resume.unwrap(), serde_json::Map::new())
        .await
        .unwrap_err();
    assert_eq!(settled.status(), Status::FailedPrecondition, "{settled}");
    assert_eq!(t.runs(), 0);
}

#[tokio::test]
async fn a_late_approval_of_an_abandoned_hold_is_refused_in_memory() {
    late_approval_of_an_abandoned_hold_is_refused(Arc::new(InMemoryStore::new())).await;
}

#[tokio::test]
async fn a_late_approval_of_an_abandoned_hold_is_refused_in_sqlite() {
    let (_dir, store) = sqlite().await;
    late_approval_of_an_abandoned_hold_is_refused(store).await;
}

/// The same on one connection: the paused turn, then a new message.
#[tokio::test]
async fn a_new_message_on_the_same_connection_abandons_the_paused_calls() {
    let t = teller(Arc::new(InMemoryStore::new()));
    t.model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "savings"}),
    ));
    t.model.push(ScriptedTurn::text("Something else, then."));
    let conn = t.agent.connect(AgentInit::new()).await.unwrap();
    conn.send_text("Transfer $500").unwrap();
    conn.send_text("no, wait").unwrap();
    conn.close();
    let out = conn.output().await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    let last = t
        .agent
        .snapshot(out.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    let paused = last.parent_id.unwrap();
    let trail = t.audit_of(&paused).await;
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].decision, AuditDecision::Abandoned);
}

/// A store that interferes with the turns on it the way a concurrent turn
/// would: with `both` set, its first two resume claims wait for each other
/// (for a few seconds at most), so both turns have read the paused
/// snapshot (unclaimed) before either claims; with `copy` set, the next
/// read of that snapshot answers with the copy, taken earlier (what a turn
/// that read it just before another claimed it saw).
struct Interfering {
    inner: Arc<dyn SessionStore>,
    claims: AtomicUsize,
    both: Option<tokio::sync::Barrier>,
    copy: std::sync::Mutex<Option<Snapshot>>,
}

impl Interfering {
    fn new(inner: Arc<dyn SessionStore>, both: Option<tokio::sync::Barrier>) -> Self {
        Interfering {
            inner,
            claims: AtomicUsize::new(0),
            both,
            copy: std::sync::Mutex::new(None),
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for Interfering {
    async fn get_snapshot(&self, id: &str) -> holdpoint::Result<Option<Snapshot>> {
        let copy = self.copy.lock().unwrap().take_if(|s| s.snapshot_id == id);
        match copy {
            Some(copy) => Ok(Some(copy)),
            None => self.inner.get_snapshot(id).await,
        }
    }
    async fn get_latest_snapshot(&self, session: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.inner.get_latest_snapshot(session).await
    }
    async fn save_snapshot(&self, id: Option<&str>, update: SnapshotUpdate) -> holdpoint::Result<Option<Snapshot>> {
        self.inner.save_snapshot(id, update).await
    }
    async fn watch_status(&self, id: &str) -> holdpoint::Result<futures::stream::BoxStream<'static, SnapshotStatus>> {
        self.inner.watch_status(id).await
    }
    async fn insert_snapshot(&self, id: &str, row: Snapshot) -> holdpoint::Result<Snapshot> {
        self.inner.insert_snapshot(id, row).await
    }
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> holdpoint::Result<()> {
        if let Some(both) = &self.both
            && self.claims.fetch_add(1, Ordering::SeqCst) < 2
        {
            // Bounded: a turn that never claims must not hang the test.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), both.wait()).await;
        }
        self.inner.claim_resume(claim, audit).await
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
    fn capabilities(&self) -> holdpoint::session::Capabilities {
        self.inner.capabilities()
    }
}

async fn approval_races_a_new_message(inner: Arc<dyn SessionStore>, approval_first: bool) {
    let t = teller(Arc::clone(&inner));
    let paused = t.pause(AgentInit::new()).await;
    let snap = paused.snapshot_id.clone().unwrap();
    let racing: Arc<dyn SessionStore> = Arc::new(Interfering::new(inner, Some(tokio::sync::Barrier::new(2))));
    // The same agent on the racing store.
    let r = Teller {
        store: Arc::clone(&racing),
        ..teller(racing)
    };
    let r = Teller {
        tool: t.tool.clone(),
        ..r
    };
    r.model.push(ScriptedTurn::text("the winner's reply"));
    let approve = r.agent.run(r.approval(&paused), AgentInit::snapshot(&snap));
    let message = r.agent.run(
        AgentInput::text("forget the transfer"),
        AgentInit::session(&paused.session_id),
    );
    let (approved, messaged) = if approval_first {
        tokio::join!(approve, message)
    } else {
        let (m, a) = tokio::join!(message, approve);
        (a, m)
    };
    let (approved, messaged) = (approved.settled(), messaged.settled());
    let won = |o: &AgentOutput| o.finish_reason == FinishReason::Stop;
    assert!(
        won(&approved) != won(&messaged),
        "exactly one wins: {approved:?} / {messaged:?}"
    );
    let loser = if won(&approved) { &messaged } else { &approved };
    assert_eq!(loser.finish_reason, FinishReason::Failed, "{loser:?}");
    assert_eq!(loser.error.as_ref().unwrap().status, Status::Aborted, "{loser:?}");
    assert_eq!(
        r.runs(),
        usize::from(won(&approved)),
        "the transfer ran only if the approval won"
    );
    let children: Vec<_> = r
        .rows()
        .await
        .into_iter()
        .filter(|s| s.parent_id.as_deref() == Some(snap.as_str()))
        .collect();
    assert_eq!(children.len(), 1, "one successor of the paused snapshot: {children:?}");
    let decisions: Vec<_> = r.audit_of(&snap).await.into_iter().map(|a| a.decision).collect();
    // The teller's `Approval { approved }` means yes or no, so its
    // restart is recorded as an approval.
    let expected = if won(&approved) {
        AuditDecision::Approve
    } else {
        AuditDecision::Abandoned
    };
    assert_eq!(decisions, vec![expected]);
    if won(&messaged) {
        assert_abandoned_refusal(&approved);
    }
}

#[tokio::test]
async fn an_approval_racing_a_new_message_has_one_winner_in_memory() {
    for approval_first in [true, false] {
        approval_races_a_new_message(Arc::new(InMemoryStore::new()), approval_first).await;
    }
}

#[tokio::test]
async fn an_approval_racing_a_new_message_has_one_winner_in_sqlite() {
    for approval_first in [true, false] {
        let (_dir, store) = sqlite().await;
        approval_races_a_new_message(store, approval_first).await;
    }
}

/// Branching from an older snapshot with `init.snapshotId`: from one whose
/// calls were answered (closed) it works and abandons nothing; a paused
/// snapshot the session went on past without answering is not answerable
/// any more.
async fn branching_from_older_snapshots(store: Arc<dyn SessionStore>) {
    let t = teller(store);
    // Answered: pause, approve, then branch from the paused snapshot.
    let paused = t.pause(AgentInit::new()).await;
    let snap = paused.snapshot_id.clone().unwrap();
    t.model.push(ScriptedTurn::text("Transferred."));
    let done = t
        .agent
        .run(t.approval(&paused), AgentInit::snapshot(&snap))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(t.runs(), 1);
    t.model.push(ScriptedTurn::text("A branch."));
    let branch = t
        .agent
        .run(
            AgentInput::text("what if I had asked instead"),
            AgentInit::snapshot(&snap),
        )
        .await
        .unwrap();
    assert_eq!(branch.finish_reason, FinishReason::Stop, "{branch:?}");
    let decisions: Vec<_> = t.audit_of(&snap).await.into_iter().map(|a| a.decision).collect();
    assert_eq!(decisions, vec![AuditDecision::Approve], "nothing abandoned");
    assert_eq!(t.runs(), 1);

    // Never answered: a branch from an earlier snapshot leaves the paused
    // one behind; answering it now is refused.
    t.model.push(ScriptedTurn::text("Hello."));
    let start = t.agent.run_text("hi").await.unwrap();
    let start_id = start.snapshot_id.clone().unwrap();
    let held = t.pause(AgentInit::session(&start.session_id)).await;
    let held_id = held.snapshot_id.clone().unwrap();
    t.model.push(ScriptedTurn::text("Another branch."));
    let other = t
        .agent
        .run(AgentInput::text("start over"), AgentInit::snapshot(&start_id))
        .await
        .unwrap();
    assert_eq!(other.finish_reason, FinishReason::Stop, "{other:?}");
    let before = t.rows().await;
    t.model.push(ScriptedTurn::text("Transferred."));
    let late = t
        .agent
        .run(t.approval(&held), AgentInit::snapshot(&held_id))
        .await
        .failed();
    assert_eq!(late.finish_reason, FinishReason::Failed, "{late:?}");
    let err = late.error.unwrap();
    assert_eq!(err.status, Status::Aborted);
    assert!(err.message.contains("left behind"), "{}", err.message);
    assert_eq!(t.runs(), 1, "the left-behind transfer never ran");
    assert_eq!(t.rows().await, before, "nothing was written");
}

#[tokio::test]
async fn branching_from_older_snapshots_in_memory() {
    branching_from_older_snapshots(Arc::new(InMemoryStore::new())).await;
}

#[tokio::test]
async fn branching_from_older_snapshots_in_sqlite() {
    let (_dir, store) = sqlite().await;
    branching_from_older_snapshots(store).await;
}

/// A new message whose process died after it abandoned the paused calls
/// (its claim lapsed, nothing follows the paused snapshot) does not leave
/// the session stuck: the next new message takes the lapsed claim over and
/// writes under the paused snapshot's successor id; the abandoned calls
/// stay unanswerable and are not listed as in doubt.
#[tokio::test]
async fn a_new_message_takes_over_the_lapsed_claim_of_a_dead_abandoning_turn() {
    let t = teller(Arc::new(InMemoryStore::new()));
    let paused = t.pause(AgentInit::new()).await;
    let snap = paused.snapshot_id.clone().unwrap();
    // What the dead turn left: its claim, with a lease that lapses at once,
    // and its `abandoned` record.
    let call = t
        .agent
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let record = AuditRecord {
        id: "dead-turn".into(),
        at: chrono::Utc::now(),
        principal: None,
        actor: None,
        agent: Some("bank".into()),
        session_id: paused.session_id.clone(),
        snapshot_id: snap.clone(),
        tool: call.tool,
        reference: call.reference,
        input_hash: holdpoint::session::hash_json(&call.input),
        input: None,
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Abandoned,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    };
    let claim = ResumeClaim::new(snap.clone()).lease(std::time::Duration::from_millis(1));
    t.store.claim_resume(claim, vec![record]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        t.agent
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );

    t.model.push(ScriptedTurn::text("Back again."));
    let chat = t
        .agent
        .run(AgentInput::text("hello?"), AgentInit::session(&paused.session_id))
        .await
        .unwrap();
    assert_eq!(chat.finish_reason, FinishReason::Stop, "{chat:?}");
    assert_eq!(chat.snapshot_id.unwrap(), holdpoint::session::successor_id(&snap));
    let late = t
        .agent
        .run(t.approval(&paused), AgentInit::snapshot(&snap))
        .await
        .failed();
    assert_abandoned_refusal(&late);
    assert_eq!(t.runs(), 0);
}

/// A resume that read the paused snapshot before a concurrent resume
/// claimed it and wrote its outcome lost the claim: it hears "already
/// resumed" (409 over HTTP), not that the session left the snapshot
/// behind, and nothing runs twice.
#[tokio::test]
async fn a_resume_that_read_the_hold_before_another_resume_finished_hears_already_resumed() {
    let stale = Arc::new(Interfering::new(Arc::new(InMemoryStore::new()), None));
    let t = teller(stale.clone());
    let paused = t.pause(AgentInit::new()).await;
    let snap = paused.snapshot_id.clone().unwrap();
    // What the slower resume reads, taken before the faster one claims it.
    let before_claim = t.store.get_snapshot(&snap).await.unwrap().unwrap();
    assert!(before_claim.resumed_at.is_none());

    t.model.push(ScriptedTurn::text("Transferred."));
    let won = t
        .agent
        .run(t.approval(&paused), AgentInit::snapshot(&snap))
        .await
        .unwrap();
    assert_eq!(won.finish_reason, FinishReason::Stop, "{won:?}");
    assert_eq!(t.runs(), 1);

    let before = t.rows().await;
    *stale.copy.lock().unwrap() = Some(before_claim);
    let err = t
        .agent
        .run(t.approval(&paused), AgentInit::snapshot(&snap))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Aborted, "{err}");
    assert!(err.to_string().contains("already resumed"), "{err}");
    let lost = err.failed_output().expect("a failed turn carries its output");
    assert_eq!(
        lost.failure,
        Some(holdpoint::agent::FailureReason::AlreadyResumed),
        "{lost:?}"
    );
    assert_eq!(t.runs(), 1, "the transfer ran once");
    assert_eq!(t.rows().await, before, "nothing was written");
}
