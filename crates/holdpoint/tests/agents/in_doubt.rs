//! In doubt, never re-run (docs/reference.md §8): a resume whose process stops while
//! its approved tool runs leaves a lapsed claim. The call is listed as in
//! doubt, an ordinary resume is refused, and an operator settles it.

use crate::TurnResultExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::ToolError;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{
    AuditDecision, AuditQuery, AuditRecord, InMemoryStore, ResumeClaim, SessionStore, Snapshot, SnapshotQuery,
    SnapshotStatus, SnapshotUpdate,
};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Resume, Role, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, Value, json};

const LEASE: Duration = Duration::from_millis(300);

struct Ops {
    agent: Agent,
    starts: Arc<AtomicUsize>,
}

/// An agent whose approved `closeAccount` notes each start and then takes
/// `work` to finish.
fn ops(work: Duration) -> Ops {
    ops_on(Arc::new(InMemoryStore::new()), move |input| async move {
        tokio::time::sleep(work).await;
        Ok(json!({"closed": input["account"]}))
    })
}

/// The `ops` agent on `store`: the model asks for `closeAccount` and then
/// reports its result; the approved tool notes each start, then runs
/// `work` on its input.
fn ops_on<F, Fut>(store: Arc<dyn SessionStore>, work: F) -> Ops
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let starts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&starts);
    let work = Arc::new(work);
    let close = DynamicTool::new(
        "closeAccount",
        "closes an account",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            counter.fetch_add(1, Ordering::SeqCst);
            work(input)
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/ops", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let out = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(format!("done: {out}")));
        }
        Some(ScriptedTurn::tool_call("closeAccount", json!({"account": "a-1"})))
    });
    let agent = Agent::builder("ops")
        .model(Arc::new(model))
        .tools([close])
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(store)
        .resume_lease(LEASE)
        .build()
        .unwrap();
    Ops { agent, starts }
}

fn approve(held: &AgentOutput) -> AgentInput {
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).unwrap();
    AgentInput::resume(Resume::from_parts(vec![hold.approve(Some("ok by phone")).unwrap()]))
}

fn by(principal: &str) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert(holdpoint::agent::PRINCIPAL.into(), json!(principal));
    context
}

/// The status a call was refused with: an init error, or a turn that
/// failed before anything ran.
fn refused(result: holdpoint::Result<AgentOutput>) -> (Status, String) {
    match result {
        Err(e) => (e.status(), e.to_string()),
        Ok(out) => {
            assert_eq!(out.finish_reason, FinishReason::Failed, "{out:?}");
            let error = out.error.expect("a failed turn says why");
            (error.status, error.message)
        }
    }
}

/// Holds a call, approves it, and stops the resume while the tool runs, as
/// a process dying mid-resume would (its claim renewals stop with it).
async fn die_mid_resume(ops: &Ops) -> AgentOutput {
    let held = ops.agent.run_text("close a-1").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let resume = ops
        .agent
        .run(approve(&held), AgentInit::snapshot(held.snapshot_id.clone().unwrap()));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), resume).await.is_err(),
        "the approved tool is still running"
    );
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1, "the approved tool started");
    held
}

#[tokio::test]
async fn a_resume_that_died_leaves_its_call_in_doubt_until_an_operator_settles_it() {
    let ops = ops(Duration::from_secs(3600));
    let held = die_mid_resume(&ops).await;
    let snapshot_id = held.snapshot_id.clone().unwrap();

    // Before the lease lapses the claim is held: not in doubt, not settleable.
    assert!(
        ops.agent
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    let early = refused(
        ops.agent
            .decisions()
            .settle(&snapshot_id, Resume::default(), Map::new())
            .await,
    );
    assert_eq!(early.0, Status::FailedPrecondition, "{early:?}");

    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let row = ops.agent.snapshot(&snapshot_id, Access::Full).await.unwrap().unwrap();
    assert!(row.resume_lapsed(chrono::Utc::now()), "{row:?}");

    // Another resume is refused, whoever sends it.
    let again = refused(
        ops.agent
            .run(approve(&held), AgentInit::session(held.session_id.clone()))
            .await,
    );
    assert_eq!(again.0, Status::Aborted, "{again:?}");

    // The listing shows the call as in doubt, with who approved it.
    let listed = ops.agent.decisions().in_doubt(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert!(listed[0].in_doubt);
    assert_eq!(listed[0].tool, "closeAccount");
    assert_eq!(listed[0].snapshot_id, snapshot_id);
    assert_eq!(listed[0].decided.len(), 1);
    assert_eq!(listed[0].decided[0].decision, AuditDecision::Approve);
    assert!(
        ops.agent
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "a call in doubt is not offered for approval"
    );

    // The operator found the account closed and answers with its result.
    let settle = Resume::from_parts(vec![listed[0].part.respond(json!({"closed": "a-1"})).unwrap()]);
    let done = ops
        .agent
        .decisions()
        .settle(&snapshot_id, settle.clone(), by("ops-oncall"))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert!(done.message.unwrap().text().contains("a-1"));
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1, "the tool never ran a second time");

    // Settled: nothing in doubt, a second settlement is refused, and the
    // audit trail says who settled it.
    assert!(
        ops.agent
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    let twice = refused(ops.agent.decisions().settle(&snapshot_id, settle, Map::new()).await);
    assert_eq!(twice.0, Status::FailedPrecondition, "{twice:?}");
    let trail = ops.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(trail.len(), 2, "{trail:#?}");
    assert_eq!(trail[0].decision, AuditDecision::Respond);
    assert!(trail[0].settles);
    assert_eq!(trail[0].principal.as_deref(), Some("ops-oncall"));
    assert!(!trail[1].settles);
}

#[tokio::test]
async fn a_live_resume_renews_its_claim_and_is_never_in_doubt() {
    let ops = ops(LEASE * 4);
    let held = ops.agent.run_text("close a-1").await.unwrap();
    let snapshot_id = held.snapshot_id.clone().unwrap();
    let agent = ops.agent.clone();
    let input = approve(&held);
    let init = AgentInit::snapshot(snapshot_id.clone());
    let resume = tokio::spawn(async move { agent.run(input, init).await });
    // Check well past the lease while the tool still works.
    for _ in 0..6 {
        tokio::time::sleep(LEASE / 2).await;
        let row = ops.agent.snapshot(&snapshot_id, Access::Full).await.unwrap().unwrap();
        if row.state.is_some() && resume.is_finished() {
            break;
        }
        assert!(!row.resume_lapsed(chrono::Utc::now()), "the claim was renewed: {row:?}");
        assert!(
            ops.agent
                .decisions()
                .in_doubt(SnapshotQuery::default())
                .await
                .unwrap()
                .is_empty()
        );
    }
    let done = resume.await.unwrap().unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1);
    tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
    assert!(
        ops.agent
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "a finished resume is not in doubt once its lease ends"
    );
    let err = refused(
        ops.agent
            .decisions()
            .settle(&snapshot_id, Resume::default(), Map::new())
            .await,
    );
    assert_eq!(err.0, Status::FailedPrecondition, "{err:?}");
    assert!(err.1.contains("finished"), "{err:?}");
}

#[tokio::test]
async fn settling_needs_an_answer_and_a_snapshot_the_caller_owns() {
    let ops = ops(Duration::from_secs(3600));
    let held = die_mid_resume(&ops).await;
    let snapshot_id = held.snapshot_id.clone().unwrap();
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    let empty = refused(
        ops.agent
            .decisions()
            .settle(&snapshot_id, Resume::default(), Map::new())
            .await,
    );
    assert_eq!(empty.0, Status::InvalidArgument, "{empty:?}");
    let missing = refused(
        ops.agent
            .decisions()
            .settle("no-such-snapshot", Resume::default(), Map::new())
            .await,
    );
    assert_eq!(missing.0, Status::NotFound, "{missing:?}");
    // Another agent on the same store does not see it.
    let other = Agent::builder("other")
        .model(Arc::new(ScriptedModel::new("unused")))
        .store(Arc::clone(ops.agent.store().unwrap()))
        .build()
        .unwrap();
    let answer = Resume::from_parts(vec![held.interrupts()[0].respond(json!({"closed": "a-1"})).unwrap()]);
    let foreign = refused(other.decisions().settle(&snapshot_id, answer, Map::new()).await);
    assert_eq!(foreign.0, Status::NotFound, "{foreign:?}");
    // The failed attempts changed nothing: the call is still in doubt.
    assert_eq!(
        ops.agent
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

/// A store that acts out a resume's process freezing. While `frozen` names
/// a paused snapshot it refuses every write to that row (other rows and
/// claims still go through): the resume's claim renewals fail. With `armed` set to
/// a paused snapshot, it holds back the first write that is not to that
/// row (the resume's outcome), says so on `reached`, and lets it through
/// once `release` gets a permit: the resume froze after it confirmed its
/// claim and before its write landed.
struct Freezable {
    inner: InMemoryStore,
    frozen: std::sync::Mutex<Option<String>>,
    armed: std::sync::Mutex<Option<String>>,
    reached: tokio::sync::Semaphore,
    release: tokio::sync::Semaphore,
}

impl Freezable {
    fn new() -> Self {
        Freezable {
            inner: InMemoryStore::new(),
            frozen: std::sync::Mutex::new(None),
            armed: std::sync::Mutex::new(None),
            reached: tokio::sync::Semaphore::new(0),
            release: tokio::sync::Semaphore::new(0),
        }
    }

    /// Whether a write to `id` is the held-back outcome (disarms).
    fn outcome_write(&self, id: Option<&str>) -> bool {
        let mut armed = self.armed.lock().unwrap();
        if armed.is_some() && id != armed.as_deref() {
            *armed = None;
            return true;
        }
        false
    }
}

#[async_trait::async_trait]
impl SessionStore for Freezable {
    async fn get_snapshot(&self, id: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.inner.get_snapshot(id).await
    }
    async fn get_latest_snapshot(&self, session: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.inner.get_latest_snapshot(session).await
    }
    async fn save_snapshot(&self, id: Option<&str>, update: SnapshotUpdate) -> holdpoint::Result<Option<Snapshot>> {
        if id.is_some() && id == self.frozen.lock().unwrap().as_deref() {
            return Err(holdpoint::Error::Unavailable("frozen".into()));
        }
        if self.outcome_write(id) {
            self.reached.add_permits(1);
            self.release.acquire().await.unwrap().forget();
        }
        self.inner.save_snapshot(id, update).await
    }
    async fn watch_status(&self, id: &str) -> holdpoint::Result<futures::stream::BoxStream<'static, SnapshotStatus>> {
        self.inner.watch_status(id).await
    }
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> holdpoint::Result<()> {
        self.inner.claim_resume(claim, audit).await
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
    fn capabilities(&self) -> holdpoint::session::Capabilities {
        self.inner.capabilities()
    }
}

/// A resume that froze past its lease while its tool ran, and woke up
/// after an operator settled its call, writes nothing, whether its tool
/// then succeeds or fails: the session goes on from the settlement, with
/// one successor of the paused snapshot. (Before, the woken resume wrote a
/// second successor, completed or failed, which became the session's
/// latest and hid the settlement.)
#[tokio::test]
async fn a_resume_that_wakes_after_its_call_was_settled_writes_nothing() {
    wake_after_settlement(false).await;
    wake_after_settlement(true).await;
}

async fn wake_after_settlement(tool_fails: bool) {
    let (store, gate, Ops { agent, starts }) = gated_ops(tool_fails);
    let held = agent.run_text("close a-1").await.unwrap();
    let resume = resume_in_task(&agent, &held);
    while starts.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The resume's process freezes: its renewals fail and the lease lapses.
    *store.frozen.lock().unwrap() = held.snapshot_id.clone();
    // Settled while the resume is still frozen (thawed earlier, one of its
    // renewals could win the race and keep the claim).
    let settled = settle_once_lapsed(&agent, &held).await;
    *store.frozen.lock().unwrap() = None;

    // The frozen resume wakes up: its tool finishes, and it may not write.
    gate.add_permits(1);
    assert_taken_over(resume.await.unwrap().settled(), tool_fails);
    assert_only_successor(&agent, &held, &settled).await;
    assert_eq!(starts.load(Ordering::SeqCst), 1, "the tool ran once");
}

/// The `ops` agent on a [`Freezable`] store, its approved tool waiting
/// for a permit on the returned gate, then closing the account or failing.
fn gated_ops(tool_fails: bool) -> (Arc<Freezable>, Arc<tokio::sync::Semaphore>, Ops) {
    let store = Arc::new(Freezable::new());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let tool_gate = Arc::clone(&gate);
    let ops = ops_on(Arc::clone(&store) as Arc<dyn SessionStore>, move |input| {
        let gate = Arc::clone(&tool_gate);
        async move {
            let _permit = gate.acquire().await.expect("the gate stays open");
            close_or_fail(input, tool_fails)
        }
    });
    (store, gate, ops)
}

/// The approved tool's work: closes the account, or fails.
fn close_or_fail(input: Value, fails: bool) -> Result<Value, ToolError> {
    if fails {
        return Err(ToolError::Error("the bank is down".into()));
    }
    Ok(json!({"closed": input["account"]}))
}

/// Starts the approved resume of the held call in a task of its own.
fn resume_in_task(agent: &Agent, held: &AgentOutput) -> tokio::task::JoinHandle<holdpoint::Result<AgentOutput>> {
    let (agent, input) = (agent.clone(), approve(held));
    let init = AgentInit::snapshot(held.snapshot_id.clone().unwrap());
    tokio::spawn(async move { agent.run(input, init).await })
}

/// Waits for the held call's claim to lapse, and an operator settles it.
async fn settle_once_lapsed(agent: &Agent, held: &AgentOutput) -> AgentOutput {
    settle_once_lapsed_with(agent, held, json!({"closed": "a-1"})).await
}

/// [`settle_once_lapsed`], the operator answering with `output`.
async fn settle_once_lapsed_with(agent: &Agent, held: &AgentOutput, output: Value) -> AgentOutput {
    tokio::time::sleep(LEASE + Duration::from_millis(150)).await;
    let listed = agent.decisions().in_doubt(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0].snapshot_id, held.snapshot_id.clone().unwrap());
    let settle = Resume::from_parts(vec![listed[0].part.respond(output).unwrap()]);
    let snapshot_id = held.snapshot_id.as_deref().unwrap();
    let settled = agent
        .decisions()
        .settle(snapshot_id, settle, by("ops-oncall"))
        .await
        .unwrap();
    assert_eq!(settled.finish_reason, FinishReason::Stop, "{settled:?}");
    settled
}

/// The woken resume's turn failed: its claim was taken over.
fn assert_taken_over(woke: AgentOutput, tool_fails: bool) {
    assert_eq!(woke.finish_reason, FinishReason::Failed, "{woke:?}");
    let error = woke.error.expect("the woken resume says why");
    assert_eq!(
        error.status,
        Status::FailedPrecondition,
        "tool fails: {tool_fails}: {error:?}"
    );
    assert!(error.message.contains("taken over"), "{error:?}");
}

/// Every snapshot of `session`, newest first.
async fn session_rows(agent: &Agent, session: &str) -> Vec<Snapshot> {
    agent
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&SnapshotQuery {
            session_id: Some(session.to_owned()),
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The settlement is the paused snapshot's one successor, and the
/// session's latest.
async fn assert_only_successor(agent: &Agent, held: &AgentOutput, settled: &AgentOutput) {
    let rows = session_rows(agent, &held.session_id).await;
    let successors: Vec<_> = rows
        .iter()
        .filter(|r| r.parent_id == held.snapshot_id)
        .map(|r| (r.snapshot_id.clone(), r.status))
        .collect();
    assert_eq!(
        successors,
        [(settled.snapshot_id.clone().unwrap(), SnapshotStatus::Completed)],
        "{rows:#?}"
    );
    let latest = agent
        .latest_snapshot(&held.session_id, Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(latest.snapshot_id), settled.snapshot_id);
}

/// The gap the lease check leaves: a resume confirms its claim (plenty of
/// lease left), then freezes before its outcome reaches the store, for
/// longer than the lease. An operator settles the call meanwhile. When the
/// resume's write lands it finds the paused snapshot's successor id taken
/// and writes nothing, whether its tool succeeded or failed. (Before, it
/// wrote a second successor under a fresh id.)
#[tokio::test]
async fn a_resume_frozen_between_its_check_and_its_write_cannot_add_a_second_outcome() {
    frozen_before_write(false).await;
    frozen_before_write(true).await;
}

async fn frozen_before_write(tool_fails: bool) {
    let store = Arc::new(Freezable::new());
    let Ops { agent, starts } = ops_on(Arc::clone(&store) as Arc<dyn SessionStore>, move |input| async move {
        close_or_fail(input, tool_fails)
    });
    let held = agent.run_text("close a-1").await.unwrap();
    *store.armed.lock().unwrap() = held.snapshot_id.clone();
    let resume = resume_in_task(&agent, &held);
    // The resume ran its tool, confirmed its claim and froze on its write.
    store.reached.acquire().await.unwrap().forget();
    assert_eq!(starts.load(Ordering::SeqCst), 1);
    let settled = settle_once_lapsed(&agent, &held).await;

    // The frozen write lands now.
    store.release.add_permits(1);
    assert_taken_over(resume.await.unwrap().settled(), tool_fails);
    assert_only_successor(&agent, &held, &settled).await;
    assert_eq!(starts.load(Ordering::SeqCst), 1, "the tool ran once");
}

/// A late approval that asks to detach, of a call already resumed, is
/// refused like an attached one (`ABORTED`) and writes nothing. Before, it
/// detached first: its pending row became a failed copy of the paused
/// snapshot, newer than the real outcome, so the session's latest again
/// held the open call, and a resume by session id ran the tool a second
/// time.
#[tokio::test]
async fn a_late_detached_approval_is_refused_and_leaves_nothing_to_resume() {
    let ops = ops(Duration::from_millis(1));
    let held = ops.agent.run_text("close a-1").await.unwrap();
    let snapshot_id = held.snapshot_id.clone().unwrap();
    let done = ops
        .agent
        .run(approve(&held), AgentInit::snapshot(snapshot_id.clone()))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);

    let mut late = approve(&held);
    late.detach = Some(true);
    let refused_late = refused(ops.agent.run(late, AgentInit::snapshot(snapshot_id.clone())).await);
    assert_eq!(refused_late.0, Status::Aborted, "{refused_late:?}");
    assert!(refused_late.1.contains("already resumed"), "{refused_late:?}");

    let rows = session_rows(&ops.agent, &held.session_id).await;
    assert_eq!(rows.len(), 2, "the paused snapshot and its outcome only: {rows:#?}");
    let latest = ops
        .agent
        .latest_snapshot(&held.session_id, Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(latest.snapshot_id), done.snapshot_id);

    // A resume by session id finds the outcome, where the call is no
    // longer open: refused (`refused` checks the turn failed).
    let again = refused(
        ops.agent
            .run(approve(&held), AgentInit::session(held.session_id.clone()))
            .await,
    );
    assert_eq!(again.0, Status::InvalidArgument, "{again:?}");
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1, "the tool ran once");
}

/// A resume that detaches writes its pending row as the paused snapshot's
/// successor under the id its outcome takes, so no settlement or second
/// writer can add another successor beside it.
#[tokio::test]
async fn a_detached_resume_writes_its_pending_row_under_the_successor_id() {
    let ops = ops(Duration::from_millis(50));
    let held = ops.agent.run_text("close a-1").await.unwrap();
    let snapshot_id = held.snapshot_id.clone().unwrap();
    let mut input = approve(&held);
    input.detach = Some(true);
    let detached = ops
        .agent
        .run(input, AgentInit::snapshot(snapshot_id.clone()))
        .await
        .unwrap();
    assert_eq!(detached.finish_reason, FinishReason::Detached, "{detached:?}");
    let successor = holdpoint::session::successor_id(&snapshot_id);
    assert_eq!(detached.snapshot_id.as_deref(), Some(successor.as_str()));
    let mut row = ops.agent.snapshot(&successor, Access::Full).await.unwrap().unwrap();
    for _ in 0..100 {
        if row.status == SnapshotStatus::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        row = ops.agent.snapshot(&successor, Access::Full).await.unwrap().unwrap();
    }
    assert_eq!(row.status, SnapshotStatus::Completed, "{row:?}");
    assert_eq!(row.parent_id.as_deref(), Some(snapshot_id.as_str()));
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1);
}

/// A resume that detached and died mid-tool leaves its claim lapsed and its
/// pending row unfinished. The call is listed in doubt, and the
/// settlement's outcome replaces the pending row; a live detached resume is
/// not settleable. (Before, the pending row hid the call from the in-doubt
/// listing and counted as the resume's outcome, so the settlement was
/// refused: the call stayed in doubt for good.) When the resume was only
/// frozen and wakes up, it writes nothing over the settlement.
#[tokio::test]
async fn a_detached_resume_that_died_is_settled_in_its_pending_rows_place() {
    let (store, gate, Ops { agent, starts }) = gated_ops(false);
    let held = agent.run_text("close a-1").await.unwrap();
    let snapshot_id = held.snapshot_id.clone().unwrap();
    let mut input = approve(&held);
    input.detach = Some(true);
    let detached = agent
        .run(input, AgentInit::snapshot(snapshot_id.clone()))
        .await
        .unwrap();
    let pending = detached.snapshot_id.clone().unwrap();
    while starts.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Alive (beating, renewing): not settleable.
    let live = refused(
        agent
            .decisions()
            .settle(&snapshot_id, Resume::default(), Map::new())
            .await,
    );
    assert_eq!(live.0, Status::FailedPrecondition, "{live:?}");

    // The process freezes: renewals fail and the lease lapses. The call is
    // listed in doubt (the unfinished pending row does not hide it), and
    // the operator's answer differs from what the tool would return, so
    // whose outcome the row holds shows.
    *store.frozen.lock().unwrap() = Some(snapshot_id.clone());
    let settled = settle_once_lapsed_with(&agent, &held, json!({"closed": "by ops"})).await;
    assert_eq!(
        settled.snapshot_id.as_deref(),
        Some(pending.as_str()),
        "in the pending row's place"
    );
    assert_only_successor(&agent, &held, &settled).await;

    // It wakes: its tool finishes, and it writes nothing over the settlement.
    *store.frozen.lock().unwrap() = None;
    gate.add_permits(1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let row = agent.snapshot(&pending, Access::Full).await.unwrap().unwrap();
    assert_eq!(row.status, SnapshotStatus::Completed);
    let last = row.state.unwrap().messages.last().unwrap().text();
    assert_eq!(
        last,
        settled.message.as_ref().unwrap().text(),
        "the settlement's outcome stands"
    );
    assert_only_successor(&agent, &held, &settled).await;
    assert_eq!(starts.load(Ordering::SeqCst), 1, "the tool ran once");
}

/// A call edited by its approver is held again as the revised call; once
/// that is approved and its process dies, the call in doubt is listed with
/// the input it ran with (the original kept beside it) and settled once
/// without running again.
#[tokio::test]
async fn an_edited_call_left_in_doubt_is_listed_with_the_input_it_ran_with() {
    let ops = ops(Duration::from_secs(3600));
    let held = ops.agent.run_text("close a-1").await.unwrap();
    let part = held.interrupts()[0].clone();
    let edited = part
        .restart_with_input(json!({"account": "a-2"}), Some(json!({"toolApproved": true})))
        .unwrap();
    let revised = ops
        .agent
        .run(
            AgentInput::resume(Resume::from_parts(vec![edited])),
            AgentInit::snapshot(held.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        revised.finish_reason,
        FinishReason::Interrupted,
        "an edit is held again"
    );
    assert_eq!(ops.starts.load(Ordering::SeqCst), 0, "nothing ran on the edit");

    let resume = ops.agent.run(
        approve(&revised),
        AgentInit::snapshot(revised.snapshot_id.clone().unwrap()),
    );
    let early = tokio::time::timeout(Duration::from_millis(100), resume).await;
    assert!(early.is_err(), "the revised call is still running: {early:?}");
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1);
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;

    let listed = ops.agent.decisions().in_doubt(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(
        listed[0].input,
        json!({"account": "a-2"}),
        "the input the call ran with"
    );
    assert_eq!(listed[0].decided[0].decision, AuditDecision::Approve);
    let trail = ops.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let edit = trail
        .iter()
        .find(|r| r.decision == AuditDecision::Edit)
        .unwrap_or_else(|| panic!("the edit is audited: {trail:#?}"));
    assert_eq!(edit.input, Some(json!({"account": "a-2"})));
    assert_eq!(edit.original_input, Some(json!({"account": "a-1"})));
    assert_eq!(
        listed[0].part.metadata.as_ref().and_then(|m| m.get("replacedInput")),
        Some(&json!({"account": "a-1"})),
        "the original input is kept beside it"
    );

    let settle = Resume::from_parts(vec![listed[0].part.respond(json!({"closed": "a-2"})).unwrap()]);
    let done = ops
        .agent
        .decisions()
        .settle(&listed[0].snapshot_id, settle, by("ops-oncall"))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert!(done.message.unwrap().text().contains("a-2"));
    assert_eq!(ops.starts.load(Ordering::SeqCst), 1, "never ran a second time");
}
