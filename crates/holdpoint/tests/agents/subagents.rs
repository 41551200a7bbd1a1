//! Sub-agents (docs/reference.md §16): a child's holds surface on the root
//! turn, are answered there and resume the child in place, exactly once,
//! on every store.

use crate::TurnResultExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use holdpoint::agent::subagent::{ChildFailure, SubagentOptions, SurfacedHold};
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput, PendingApproval};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{InMemoryStore, SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, GenerateResponse, Message, Part, Resume, Role, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Value, json};

const LEASE: Duration = Duration::from_millis(300);

/// A tree of agents on one store: `support` → (`desk` →) `banking`, whose
/// `transferMoney` is held by ToolApproval and whose `getBalance` runs
/// beside it.
struct Tree {
    root: Agent,
    banking: Agent,
    middle: Option<Agent>,
    transfers: Arc<AtomicUsize>,
    balances: Arc<AtomicUsize>,
    store: Arc<dyn SessionStore>,
}

/// A model that delegates the user's text to `tool` (once per text line
/// of the user message, in one round), then reports what came back.
fn delegating(tool: &'static str) -> ScriptedModel {
    ScriptedModel::from_fn(format!("scripted/{tool}"), move |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let outs: Vec<String> = last
                .content
                .iter()
                .filter_map(|p| p.as_tool_response()?.output.clone())
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                .collect();
            return Some(ScriptedTurn::text(format!("{tool} says: {}", outs.join(" | "))));
        }
        let text = last.text();
        let calls = text
            .lines()
            .map(|line| Part::tool_request(tool, None, Some(json!({"input": line}))))
            .collect();
        Some(ScriptedTurn::response(GenerateResponse::from_message(Message::new(
            Role::Model,
            calls,
        ))))
    })
}

fn tree_on(store: Arc<dyn SessionStore>, depth: usize, block: Option<Duration>) -> Tree {
    let transfers = Arc::new(AtomicUsize::new(0));
    let balances = Arc::new(AtomicUsize::new(0));
    let t = Arc::clone(&transfers);
    let transfer = DynamicTool::new(
        "transferMoney",
        "moves money",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let n = t.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if let Some(d) = block {
                    tokio::time::sleep(d).await;
                }
                Ok(json!({"transactionId": format!("tx-{n}"), "amount": input["amount"]}))
            }
        },
    )
    .into_tool();
    let b = Arc::clone(&balances);
    let balance = DynamicTool::new(
        "getBalance",
        "reads a balance",
        json!({"type": "object"}),
        move |_ctx: ToolContext, _input: Value| {
            b.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!("$1,250.00")) }
        },
    )
    .into_tool();
    // The banking model reads the balance and moves the amount the task
    // names, in one round; then reports.
    let banking_model = ScriptedModel::from_fn("scripted/banking", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let outs: Vec<String> = last
                .content
                .iter()
                .filter_map(|p| p.as_tool_response()?.output.clone())
                .map(|o| o.to_string())
                .collect();
            return Some(ScriptedTurn::text(format!("banking: {}", outs.join(", "))));
        }
        let amount: u64 = last
            .text()
            .split(|c: char| !c.is_ascii_digit())
            .find_map(|w| w.parse().ok())
            .unwrap_or(1);
        Some(ScriptedTurn::response(GenerateResponse::from_message(Message::new(
            Role::Model,
            vec![
                Part::tool_request("getBalance", None, Some(json!({"account": "checking"}))),
                Part::tool_request(
                    "transferMoney",
                    None,
                    Some(json!({"amount": amount, "toAccount": "savings"})),
                ),
            ],
        ))))
    });
    let banking = Agent::builder("banking")
        .model(Arc::new(banking_model))
        .tools(vec![transfer, balance])
        .middleware(ToolApproval::allow(["getBalance"]).into_middleware())
        .store(Arc::clone(&store))
        .resume_lease(LEASE)
        .build()
        .unwrap();
    let (child, middle) = if depth >= 2 {
        let desk = Agent::builder("desk")
            .model(Arc::new(delegating("banking")))
            .subagent(banking.clone())
            .store(Arc::clone(&store))
            .resume_lease(LEASE)
            .build()
            .unwrap();
        (desk.clone(), Some(desk))
    } else {
        (banking.clone(), None)
    };
    let child_name: &'static str = if depth >= 2 { "desk" } else { "banking" };
    let root = Agent::builder("support")
        .model(Arc::new(delegating(child_name)))
        .subagent(child)
        .store(Arc::clone(&store))
        .resume_lease(LEASE)
        .build()
        .unwrap();
    Tree {
        root,
        banking,
        middle,
        transfers,
        balances,
        store,
    }
}

fn answer(entries: &[&PendingApproval], approve: bool) -> AgentInput {
    let parts = entries
        .iter()
        .map(|e| {
            let hold = ToolApproval::interrupted(&e.part).expect("an approval hold");
            if approve {
                hold.approve(Some("ok"))
            } else {
                hold.deny(Some("no"))
            }
            .unwrap()
        })
        .collect::<Vec<_>>();
    AgentInput::resume(Resume::from_parts(parts))
}

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

async fn waiting(store: &Arc<dyn SessionStore>, id: &str) -> bool {
    store.get_snapshot(id).await.unwrap().unwrap().is_waiting()
}

/// A hold two levels down surfaces on the root with its path, is listed
/// by the root's `pending`, and answering it there resumes the innermost
/// child in place (its completed sibling is not re-run) and then every
/// level above it.
pub async fn two_levels_surface_and_resume(store: Arc<dyn SessionStore>) {
    let t = tree_on(store, 2, None);
    let held = t.root.run_text("Transfer $500 to my savings account.").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    let outer = SurfacedHold::of(&held.interrupts()[0]).expect("the desk's hold surfaced");
    assert_eq!(outer.agent, "desk");
    let inner = SurfacedHold::of(&outer.interrupts[0]).expect("the bank's hold surfaced");
    assert_eq!(inner.agent, "banking");
    assert_eq!(inner.interrupts.len(), 1);
    let leaf = inner.interrupts[0].as_tool_request().unwrap();
    assert_eq!(leaf.name, "transferMoney");
    assert_eq!(leaf.input.as_ref().unwrap()["amount"], 500);
    assert_eq!(t.balances.load(Ordering::SeqCst), 1);

    // The child session is linked to its parent's session and call.
    let child = t
        .banking
        .latest_snapshot(&inner.session_id, Access::Full)
        .await
        .unwrap()
        .unwrap();
    let first = &child.state.as_ref().unwrap().messages[0];
    let link = &first.metadata.as_ref().unwrap()["subagentOf"];
    assert_eq!(link["agent"], "desk");
    assert_eq!(link["sessionId"], json!(outer.session_id));
    assert_eq!(link["tool"], "banking");

    let listed = t.root.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let entry = &listed[0];
    assert_eq!(entry.tool, "transferMoney");
    assert_eq!(entry.input["amount"], 500);
    assert_eq!(entry.snapshot_id, held.snapshot_id.clone().unwrap());
    let segment = |p: &Part| p.as_tool_request().unwrap().reference.clone().unwrap();
    let compound = format!(
        "{}/{}/{}",
        segment(&held.interrupts()[0]),
        segment(&outer.interrupts[0]),
        segment(&inner.interrupts[0])
    );
    assert_eq!(entry.reference.as_deref(), Some(compound.as_str()));
    assert_eq!(entry.path.len(), 2);
    assert_eq!(entry.path[0].agent, "desk");
    assert_eq!(entry.path[1].agent, "banking");
    assert_eq!(entry.path[1].session_id, inner.session_id);

    let init = AgentInit::snapshot(held.snapshot_id.clone().unwrap());
    let done = t.root.run(answer(&[entry], true), init).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert!(done.text().contains("tx-1"), "{}", done.text());
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
    assert_eq!(
        t.balances.load(Ordering::SeqCst),
        1,
        "the completed sibling is not re-run"
    );
    for (agent, session) in [
        (t.middle.as_ref().unwrap(), &outer.session_id),
        (&t.banking, &inner.session_id),
    ] {
        let latest = agent.latest_snapshot(session, Access::Full).await.unwrap().unwrap();
        assert_eq!(latest.finish_reason, Some(FinishReason::Stop), "{latest:?}");
    }
    assert!(
        t.root
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
}

/// Two children paused in one parent round are answered together: one
/// approved, one denied.
pub async fn two_children_paused_in_one_round(store: Arc<dyn SessionStore>) {
    let t = tree_on(store, 1, None);
    let held = t.root.run_text("Transfer $500\nTransfer $70").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    assert_eq!(held.interrupts().len(), 2);
    let listed = t.root.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let big = listed.iter().find(|e| e.input["amount"] == 500).unwrap();
    let small = listed.iter().find(|e| e.input["amount"] == 70).unwrap();
    let mut resume = answer(&[big], true).resume.unwrap();
    resume.restart.extend(answer(&[small], false).resume.unwrap().restart);
    let init = AgentInit::snapshot(held.snapshot_id.clone().unwrap());
    let done = t.root.run(AgentInput::resume(resume), init).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "only the approved transfer ran");
    assert!(done.text().contains("tx-1"), "{}", done.text());
    assert_eq!(t.balances.load(Ordering::SeqCst), 2);
}

/// Forged and stale answers to a nested call are refused, and nothing
/// changes at either level.
pub async fn forged_or_stale_nested_answers_change_nothing(store: Arc<dyn SessionStore>) {
    let t = tree_on(Arc::clone(&store), 1, None);
    let held = t.root.run_text("Transfer $500").await.unwrap();
    let root_id = held.snapshot_id.clone().unwrap();
    let child_id = SurfacedHold::of(&held.interrupts()[0]).unwrap().snapshot_id;
    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let init = || AgentInit::snapshot(root_id.clone());

    // An unknown nested ref.
    let mut forged = entry.part.clone();
    forged.as_tool_request_mut().unwrap().reference = Some("0/9".into());
    let hold = ToolApproval::interrupted(&forged).unwrap();
    let r = refused(
        t.root
            .run(
                AgentInput::resume(Resume::from_parts([hold.approve(None).unwrap()])),
                init(),
            )
            .await,
    );
    assert_eq!(r.0, Status::InvalidArgument, "{r:?}");

    // A changed amount, undeclared.
    let mut forged = entry.part.clone();
    forged.as_tool_request_mut().unwrap().input = Some(json!({"amount": 5000, "toAccount": "savings"}));
    let hold = ToolApproval::interrupted(&forged).unwrap();
    let r = refused(
        t.root
            .run(
                AgentInput::resume(Resume::from_parts([hold.approve(None).unwrap()])),
                init(),
            )
            .await,
    );
    assert_eq!(r.0, Status::InvalidArgument, "{r:?}");

    // A restart of the surfacing call with new input and without the
    // child's answers (a plain restart answers the child's only hold, see
    // `the_roots_output_answers_a_nested_hold_directly`; an edited one
    // names no nested answer).
    let plain = held.interrupts()[0]
        .restart_with_input(json!({"input": "Transfer $5000"}), Some(json!({"approved": true})))
        .unwrap();
    let r = refused(
        t.root
            .run(AgentInput::resume(Resume::from_parts([plain])), init())
            .await,
    );
    assert_eq!(r.0, Status::InvalidArgument, "{r:?}");

    assert!(waiting(&store, &root_id).await, "the root still waits");
    assert!(waiting(&store, &child_id).await, "the child still waits");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 0);
    assert_eq!(
        t.root
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );

    // The real answer works once; replaying it is refused.
    let done = t.root.run(answer(&[&entry], true), init()).await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let again = refused(t.root.run(answer(&[&entry], true), init()).await);
    assert_eq!(again.0, Status::Aborted, "{again:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);

    // A child's hold is listed and answered at the root only: answering it
    // on the child directly is refused, and nothing changes.
    let held = t.root.run_text("Transfer $80").await.unwrap();
    let root_id = held.snapshot_id.clone().unwrap();
    let child = SurfacedHold::of(&held.interrupts()[0]).unwrap();
    assert!(
        t.banking
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    let direct = ToolApproval::interrupted(&child.interrupts[0])
        .unwrap()
        .approve(None)
        .unwrap();
    let r = refused(
        t.banking
            .run(
                AgentInput::resume(Resume::from_parts([direct])),
                AgentInit::snapshot(child.snapshot_id.clone()),
            )
            .await,
    );
    assert_eq!(r.0, Status::FailedPrecondition, "{r:?}");
    assert!(waiting(&store, &root_id).await, "the root still waits");
    assert!(waiting(&store, &child.snapshot_id).await, "the child still waits");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
}

/// Two answers racing at the root run the inner tool once.
pub async fn concurrent_double_answer_runs_inner_once(store: Arc<dyn SessionStore>) {
    let t = tree_on(store, 1, None);
    let held = t.root.run_text("Transfer $500").await.unwrap();
    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let init = || AgentInit::snapshot(held.snapshot_id.clone().unwrap());
    let (a, b) = tokio::join!(
        t.root.run(answer(&[&entry], true), init()),
        t.root.run(answer(&[&entry], true), init())
    );
    let wins = [&a, &b]
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|o| o.finish_reason == FinishReason::Stop))
        .count();
    assert_eq!(wins, 1, "{a:?} {b:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
}

/// A process dying while the child's approved call runs leaves it in
/// doubt at both levels: listed so, an ordinary answer refused, never run
/// again.
pub async fn dying_mid_resume_leaves_the_child_in_doubt(store: Arc<dyn SessionStore>) {
    let t = tree_on(store, 1, Some(Duration::from_secs(3600)));
    let held = t.root.run_text("Transfer $500").await.unwrap();
    let child = SurfacedHold::of(&held.interrupts()[0]).unwrap();
    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let init = || AgentInit::snapshot(held.snapshot_id.clone().unwrap());
    let resume = t.root.run(answer(&[&entry], true), init());
    assert!(
        tokio::time::timeout(Duration::from_millis(150), resume).await.is_err(),
        "the approved transfer is still running"
    );
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "the transfer started");
    tokio::time::sleep(LEASE + Duration::from_millis(150)).await;

    let root_doubt = t.root.decisions().in_doubt(SnapshotQuery::default()).await.unwrap();
    assert_eq!(root_doubt.len(), 1, "{root_doubt:#?}");
    assert_eq!(root_doubt[0].tool, "transferMoney");
    assert_eq!(root_doubt[0].path.len(), 1);
    let child_doubt = t.banking.decisions().in_doubt(SnapshotQuery::default()).await.unwrap();
    assert_eq!(child_doubt.len(), 1, "{child_doubt:#?}");
    assert_eq!(child_doubt[0].snapshot_id, child.snapshot_id);

    let again = refused(t.root.run(answer(&[&entry], true), init()).await);
    assert_eq!(again.0, Status::Aborted, "{again:?}");
    let direct = refused(
        t.banking
            .run(
                answer(&[&child_doubt[0]], true),
                AgentInit::snapshot(child.snapshot_id.clone()),
            )
            .await,
    );
    assert_eq!(direct.0, Status::FailedPrecondition, "{direct:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "never re-run");

    // Settling: the child's call first (the operator found the transfer
    // went through), then the root's call with the child's answer.
    let found = child_doubt[0].part.clone();
    let mut found = found;
    found.as_tool_request_mut().unwrap().reference = child.interrupts[0].as_tool_request().unwrap().reference.clone();
    let respond = found.respond(json!({"transactionId": "tx-found"})).unwrap();
    let child_done = t
        .banking
        .decisions()
        .settle(
            &child.snapshot_id,
            Resume::from_parts([respond]),
            serde_json::Map::new(),
        )
        .await
        .unwrap();
    assert_eq!(child_done.finish_reason, FinishReason::Stop, "{child_done:?}");
    let answer_up = held.interrupts()[0].respond(json!(child_done.text())).unwrap();
    let root_done = t
        .root
        .decisions()
        .settle(
            held.snapshot_id.as_deref().unwrap(),
            Resume::from_parts([answer_up]),
            serde_json::Map::new(),
        )
        .await
        .unwrap();
    assert_eq!(root_done.finish_reason, FinishReason::Stop, "{root_done:?}");
    assert!(root_done.text().contains("tx-found"), "{}", root_done.text());
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "never re-run");
    let _ = &t.store;
}

/// A new message that abandons the root's paused calls abandons the
/// children they surfaced: no longer listed, nor answerable directly.
pub async fn abandoning_the_root_abandons_paused_children(store: Arc<dyn SessionStore>) {
    let t = tree_on(Arc::clone(&store), 2, None);
    let held = t.root.run_text("Transfer $500").await.unwrap();
    let outer = SurfacedHold::of(&held.interrupts()[0]).unwrap();
    let inner = SurfacedHold::of(&outer.interrupts[0]).unwrap();
    assert_eq!(
        t.root
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        t.banking
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "listed on the root only"
    );
    let next = t
        .root
        .run(
            AgentInput::text("Transfer $9"),
            AgentInit::session(held.session_id.clone()),
        )
        .await;
    let next = next.unwrap();
    assert_eq!(next.finish_reason, FinishReason::Interrupted);
    for id in [&outer.snapshot_id, &inner.snapshot_id] {
        assert!(!waiting(&store, id).await, "child {id} was abandoned");
    }
    let listed = t.root.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "only the new hold: {listed:#?}");
    assert_eq!(listed[0].input["amount"], 9);
    let direct = ToolApproval::interrupted(&inner.interrupts[0])
        .unwrap()
        .approve(None)
        .unwrap();
    let r = refused(
        t.banking
            .run(
                AgentInput::resume(Resume::from_parts([direct])),
                AgentInit::snapshot(inner.snapshot_id.clone()),
            )
            .await,
    );
    assert_eq!(r.0, Status::FailedPrecondition, "{r:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 0);
    // The new hold is answered by session id.
    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let done = t
        .root
        .run(answer(&[&entry], true), AgentInit::session(held.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
}

/// A store that records the snapshot ids each write carried (a claim as
/// `claim:ID`), in order.
struct Recording {
    inner: Arc<dyn SessionStore>,
    writes: std::sync::Mutex<Vec<Vec<String>>>,
}

impl Recording {
    fn note(&self, ids: Vec<String>) {
        self.writes.lock().unwrap().push(ids);
    }

    fn take(&self) -> Vec<Vec<String>> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl SessionStore for Recording {
    async fn get_snapshot(&self, id: &str) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        self.inner.get_snapshot(id).await
    }
    async fn get_latest_snapshot(&self, session: &str) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        self.inner.get_latest_snapshot(session).await
    }
    async fn save_snapshot(
        &self,
        id: Option<&str>,
        update: holdpoint::session::SnapshotUpdate,
    ) -> holdpoint::Result<Option<holdpoint::session::Snapshot>> {
        let saved = self.inner.save_snapshot(id, update).await?;
        if let Some(row) = &saved {
            self.note(vec![row.snapshot_id.clone()]);
        }
        Ok(saved)
    }
    async fn watch_status(
        &self,
        id: &str,
    ) -> holdpoint::Result<futures::stream::BoxStream<'static, holdpoint::session::SnapshotStatus>> {
        self.inner.watch_status(id).await
    }
    async fn claim_resume(
        &self,
        claim: holdpoint::session::ResumeClaim,
        audit: Vec<holdpoint::session::AuditRecord>,
    ) -> holdpoint::Result<()> {
        let id = format!("claim:{}", claim.snapshot_id);
        self.inner.claim_resume(claim, audit).await?;
        self.note(vec![id]);
        Ok(())
    }
    async fn insert_snapshot(
        &self,
        id: &str,
        row: holdpoint::session::Snapshot,
    ) -> holdpoint::Result<holdpoint::session::Snapshot> {
        let written = self.inner.insert_snapshot(id, row).await?;
        self.note(vec![id.to_owned()]);
        Ok(written)
    }
    async fn insert_snapshots(
        &self,
        rows: Vec<(String, holdpoint::session::Snapshot)>,
    ) -> holdpoint::Result<Vec<holdpoint::session::Snapshot>> {
        let ids = rows.iter().map(|(id, _)| id.clone()).collect();
        let written = self.inner.insert_snapshots(rows).await?;
        self.note(ids);
        Ok(written)
    }
    fn capabilities(&self) -> holdpoint::session::Capabilities {
        self.inner.capabilities()
    }
}

/// Each level's row is written in one step with its parent's (§16.8):
/// the three paused snapshots of a hold two levels deep in one write,
/// innermost first, and the three outcomes of its resume in another;
/// besides those, only the claims (one per level) write.
pub async fn levels_are_written_in_one_step(store: Arc<dyn SessionStore>) {
    let recording = Arc::new(Recording {
        inner: store,
        writes: std::sync::Mutex::default(),
    });
    let t = tree_on(Arc::clone(&recording) as Arc<dyn SessionStore>, 2, None);
    let held = t.root.run_text("Transfer $500 to my savings account.").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    let root_paused = held.snapshot_id.clone().unwrap();
    let outer = SurfacedHold::of(&held.interrupts()[0]).unwrap();
    let inner = SurfacedHold::of(&outer.interrupts[0]).unwrap();
    assert_eq!(
        recording.take(),
        vec![vec![
            inner.snapshot_id.clone(),
            outer.snapshot_id.clone(),
            root_paused.clone()
        ]],
        "the pause of three levels is one write"
    );
    for id in [&inner.snapshot_id, &outer.snapshot_id, &root_paused] {
        assert!(waiting(&t.store, id).await, "{id} is durable and waiting");
    }

    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let done = t
        .root
        .run(answer(&[&entry], true), AgentInit::snapshot(root_paused.clone()))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let latest = |agent: &Agent, session: String| {
        let agent = agent.clone();
        async move {
            agent
                .latest_snapshot(&session, Access::Full)
                .await
                .unwrap()
                .unwrap()
                .snapshot_id
        }
    };
    let outcomes = vec![
        latest(&t.banking, inner.session_id.clone()).await,
        latest(t.middle.as_ref().unwrap(), outer.session_id.clone()).await,
        done.snapshot_id.clone().unwrap(),
    ];
    let claims = [&root_paused, &outer.snapshot_id, &inner.snapshot_id].map(|id| vec![format!("claim:{id}")]);
    let mut expected: Vec<Vec<String>> = claims.to_vec();
    expected.push(outcomes);
    assert_eq!(
        recording.take(),
        expected,
        "each level claims once, outermost first, and the outcomes are one write"
    );
}

/// A parent turn dropped after its child finished (here: while a later
/// tool of the parent runs) does not lose the child's outcome: the rows
/// handed to it are written on their own (§16.8), so the child is done,
/// not in doubt, and its transfer ran once.
pub async fn a_dropped_parent_still_writes_its_finished_child(store: Arc<dyn SessionStore>) {
    let t = tree_on(Arc::clone(&store), 1, None);
    let slow = DynamicTool::new(
        "audit",
        "records the transfer (slowly)",
        json!({"type": "object"}),
        |_ctx: ToolContext, _input: Value| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!("never"))
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/slow-root", |request, _| {
        let last = request.messages.last()?;
        if last.role != Role::Tool {
            return Some(ScriptedTurn::tool_call("banking", json!({"input": last.text()})));
        }
        let from_child = last
            .content
            .iter()
            .any(|p| p.as_tool_response().is_some_and(|r| r.name == "banking"));
        Some(if from_child {
            ScriptedTurn::tool_call("audit", json!({}))
        } else {
            ScriptedTurn::text("done")
        })
    });
    let root = Agent::builder("slowSupport")
        .model(Arc::new(model))
        .subagent(t.banking.clone())
        .tools(vec![slow])
        .store(store)
        .resume_lease(LEASE)
        .build()
        .unwrap();
    let held = root.run_text("Transfer $500").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    let child = SurfacedHold::of(&held.interrupts()[0]).unwrap();
    let entry = root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    let resume = root.run(
        answer(&[&entry], true),
        AgentInit::snapshot(held.snapshot_id.clone().unwrap()),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), resume).await.is_err(),
        "the parent's later tool is still running when its turn is dropped"
    );
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
    let mut finished = None;
    for _ in 0..100 {
        let latest = t
            .banking
            .latest_snapshot(&child.session_id, Access::Full)
            .await
            .unwrap()
            .unwrap();
        if latest.snapshot_id != child.snapshot_id {
            finished = Some(latest);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let finished = finished.expect("the finished child's outcome was written");
    assert_eq!(finished.finish_reason, Some(FinishReason::Stop), "{finished:?}");
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert!(
        t.banking
            .decisions()
            .in_doubt(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "the child is done, not in doubt"
    );
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "never re-run");
}

/// Runs `case` on a fresh in-memory store, SQLite file and (when
/// configured) PostgreSQL database.
macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(std::sync::Arc::new(holdpoint::session::InMemoryStore::new())).await;
            })*
        }
        mod sqlite {
            $(#[tokio::test]
            async fn $case() {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite:{}", dir.path().join("subagents.db").display());
                let store = holdpoint_stores::open_store(&url).await.unwrap();
                super::$case(store).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(pg) = holdpoint_testkit::TempPostgres::start_or_skip(concat!("sub-agents ", stringify!($case))) else {
                    return;
                };
                let store = holdpoint_stores::open_store(pg.url()).await.unwrap();
                super::$case(store).await;
            })*
        }
    };
}

on_every_store!(
    two_levels_surface_and_resume,
    two_children_paused_in_one_round,
    forged_or_stale_nested_answers_change_nothing,
    concurrent_double_answer_runs_inner_once,
    dying_mid_resume_leaves_the_child_in_doubt,
    abandoning_the_root_abandons_paused_children,
    levels_are_written_in_one_step,
    a_dropped_parent_still_writes_its_finished_child,
);

/// A child whose turn fails gives the parent a tool failure its model
/// sees; configured so, it fails the parent's turn.
#[tokio::test]
async fn a_failing_child_is_a_tool_failure_or_fails_the_turn() {
    for (on_failure, fails) in [(ChildFailure::Tool, false), (ChildFailure::Turn, true)] {
        let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
        // The child's model has no script: its turn fails.
        let child = Agent::builder("banking")
            .model(Arc::new(ScriptedModel::new("scripted/empty")))
            .store(Arc::clone(&store))
            .build()
            .unwrap();
        let root = Agent::builder("support")
            .model(Arc::new(delegating("banking")))
            .subagent_with(child, SubagentOptions { on_failure })
            .store(store)
            .build()
            .unwrap();
        let result = root.run_text("Transfer $5").await;
        if fails {
            let out = result.failed();
            assert!(out.error.unwrap().message.contains("agent \"banking\" failed"));
        } else {
            let out = result.unwrap();
            assert_eq!(out.finish_reason, FinishReason::Stop);
            assert!(out.text().contains("agent \\\"banking\\\" failed"), "{}", out.text());
        }
    }
}

/// The child's chunks reach the root's stream, marked with its path.
#[tokio::test]
async fn child_chunks_reach_the_root_stream_marked_with_the_path() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let child_model = ScriptedModel::new("scripted/child");
    child_model.push(ScriptedTurn::streamed_text(["all ", "done"]));
    let child = Agent::builder("banking")
        .model(Arc::new(child_model))
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let root = Agent::builder("support")
        .model(Arc::new(delegating("banking")))
        .subagent(child)
        .store(store)
        .build()
        .unwrap();
    let connection = root.connect(AgentInit::new()).await.unwrap();
    connection.send_text("hello").unwrap();
    let chunks: Vec<_> = connection.receive().collect().await;
    let marked: Vec<_> = chunks
        .iter()
        .filter_map(|c| c.model_chunk.as_ref())
        .filter(|c| c.custom.as_ref().is_some_and(|v| v.get("subagent").is_some()))
        .collect();
    assert!(!marked.is_empty(), "{chunks:#?}");
    let path = &marked[0].custom.as_ref().unwrap()["subagent"];
    assert_eq!(path[0]["agent"], "banking");
    assert_eq!(path[0]["tool"], "banking");
    let text: String = marked
        .iter()
        .flat_map(|c| c.content.iter())
        .filter_map(Part::as_text)
        .collect();
    assert_eq!(text, "all done");
    let out = connection.output().await.unwrap();
    assert!(out.text().contains("all done"), "{}", out.text());
}

/// The root's output answers a nested hold directly (issue 33 item 5):
/// `holds()` lists it under its compound ref, a typed claim sees through
/// the sub-agent call that surfaced it, and a plain restart of that call
/// (as an HTTP client builds it from the output) answers the child's
/// only hold. Each resumes the child in place, once.
#[tokio::test]
async fn the_roots_output_answers_a_nested_hold_directly() {
    for how in ["holds", "typed claim", "plain restart"] {
        let t = tree_on(Arc::new(InMemoryStore::new()), 2, None);
        let held = t.root.run_text("Transfer $700 to my savings account.").await.unwrap();
        assert_eq!(held.finish_reason, FinishReason::Interrupted, "{how}: {held:?}");
        let listed = t.root.decisions().pending(SnapshotQuery::default()).await.unwrap();
        let holds = held.holds();
        assert_eq!(holds.len(), 1, "{how}: {holds:#?}");
        assert_eq!(
            holds[0].as_tool_request().unwrap().reference,
            listed[0].reference,
            "{how}: the output's hold carries the listing's compound ref"
        );
        assert_eq!(holds[0].as_tool_request().unwrap().name, "transferMoney");
        let directive = match how {
            "holds" => ToolApproval::interrupted(&holds[0]).unwrap().approve(None).unwrap(),
            "typed claim" => {
                let surfacing = &held.interrupts()[0];
                assert_eq!(surfacing.as_tool_request().unwrap().name, "desk");
                ToolApproval::interrupted(surfacing)
                    .expect("seen through the sub-agent call")
                    .approve(Some("checked"))
                    .unwrap()
            }
            _ => held.interrupts()[0]
                .restart(Some(json!({"toolApproved": true})))
                .unwrap(),
        };
        let init = AgentInit::snapshot(held.snapshot_id.clone().unwrap());
        let done = t
            .root
            .run(
                AgentInput::resume(Resume::from_parts([directive.clone()])),
                init.clone(),
            )
            .await
            .unwrap();
        assert_eq!(done.finish_reason, FinishReason::Stop, "{how}: {done:?}");
        assert!(done.text().contains("tx-1"), "{how}: {}", done.text());
        assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "{how}");
        // The same answer again claims nothing and runs nothing.
        let again = t
            .root
            .run(AgentInput::resume(Resume::from_parts([directive])), init)
            .await;
        assert!(
            again.is_err() || again.as_ref().unwrap().is_failed(),
            "{how}: {again:?}"
        );
        assert_eq!(t.transfers.load(Ordering::SeqCst), 1, "{how}: exactly once");
        assert!(
            t.root
                .decisions()
                .pending(SnapshotQuery::default())
                .await
                .unwrap()
                .is_empty()
        );
    }
}

/// A deny through the surfacing call reaches the child's hold as a denial:
/// the transfer never runs.
#[tokio::test]
async fn a_plain_denial_of_a_sub_agent_call_denies_its_only_hold() {
    let t = tree_on(Arc::new(InMemoryStore::new()), 1, None);
    let held = t.root.run_text("Transfer $50 to my savings account.").await.unwrap();
    let deny = ToolApproval::interrupted(&held.interrupts()[0])
        .expect("seen through")
        .deny(Some("not today"))
        .unwrap();
    let done = t
        .root
        .run(
            AgentInput::resume(Resume::from_parts([deny])),
            AgentInit::snapshot(held.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 0);
}

/// `Decisions::answer` takes the ref the root's output shows for the sub-agent
/// call: it picks the one hold that call surfaced.
#[tokio::test]
async fn an_answer_by_the_surfacing_calls_ref_picks_its_only_hold() {
    let t = tree_on(Arc::new(InMemoryStore::new()), 2, None);
    let held = t.root.run_text("Transfer $90 to my savings account.").await.unwrap();
    let surfacing = held.interrupts()[0]
        .as_tool_request()
        .unwrap()
        .reference
        .clone()
        .unwrap();
    let answer = holdpoint::agent::Answer::approve(held.snapshot_id.clone().unwrap()).reference(surfacing);
    let answered = t.root.decisions().answer(answer, serde_json::Map::new()).await.unwrap();
    assert!(
        matches!(answered, holdpoint::agent::Answered::Resumed(ref out) if out.finish_reason == FinishReason::Stop),
        "{answered:?}"
    );
    assert_eq!(t.transfers.load(Ordering::SeqCst), 1);
}

/// Issue 33, item 8: a refused answer to a sub-agent's hold names the
/// snapshot the caller sent; the child's snapshot is only context.
#[tokio::test]
async fn a_refusal_about_a_sub_agents_hold_names_the_callers_snapshot() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let t = tree_on(Arc::clone(&store), 1, None);
    let held = t.root.run_text("Transfer $500").await.unwrap();
    let root_id = held.snapshot_id.clone().unwrap();
    let child_id = SurfacedHold::of(&held.interrupts()[0]).unwrap().snapshot_id;
    let entry = t
        .root
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .unwrap()
        .remove(0);
    // The child's hold is claimed under the root (a resume of it that
    // died, say): the root still waits, its answer can no longer go down.
    store
        .claim_resume(holdpoint::session::ResumeClaim::new(child_id.clone()), Vec::new())
        .await
        .unwrap();
    let (status, message) = refused(
        t.root
            .run(answer(&[&entry], true), AgentInit::snapshot(root_id.clone()))
            .await,
    );
    assert_eq!(status, Status::Aborted, "{message}");
    assert!(
        message.starts_with(&format!("snapshot {root_id} was already resumed")),
        "names the caller's snapshot first: {message}"
    );
    assert!(message.contains("sub-agent call \"banking\""), "{message}");
    assert!(!message.starts_with(&format!("snapshot {child_id}")), "{message}");
    assert!(waiting(&store, &root_id).await, "the root still waits");
    assert_eq!(t.transfers.load(Ordering::SeqCst), 0);
}
