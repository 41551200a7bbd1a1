//! Approval rules with a quorum through a store (docs/reference.md §10.7):
//! partial approvals are kept on the paused snapshot, durably, written
//! only while it waits, listed and audited one row per decision; the
//! approval that completes a quorum claims the hold once, also when two
//! handles complete it at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::Utc;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::{AuditDecision, AuditQuery, HoldApproval, SessionStore, SnapshotQuery, record_approval};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Role, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, Value, json};

use super::capable::audit;
use super::fresh_id;

/// An agent named `name` on `store` whose `transferMoney` calls are held
/// by a rule that needs `quorum` approvals of `finance`, never the owner's.
fn agent(name: &str, store: Arc<dyn SessionStore>, quorum: u32, moved: &Arc<AtomicUsize>) -> Agent {
    let counter = Arc::clone(moved);
    let transfer = DynamicTool::new(
        "transferMoney",
        "moves money",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"moved": input["amount"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/quorum", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        Some(ScriptedTurn::tool_call("transferMoney", json!({"amount": 50000})))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("big transfers".into()),
        tool: Some("transferMoney".into()),
        when: Some("input.amount > 10000".into()),
        approvers: vec!["finance".into()],
        quorum,
        self_approval: false,
        ..RuleSpec::default()
    }])
    .expect("the policy compiles");
    Agent::builder(name)
        .model(Arc::new(model))
        .tools([transfer])
        .approval_policy(policy)
        .store(store)
        .build()
        .expect("the agent builds")
}

fn who(principal: &str, roles: &[&str]) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert("principal".into(), json!(principal));
    context.insert("roles".into(), json!(roles));
    context
}

async fn hold(agent: &Agent) -> AgentOutput {
    let out = agent
        .run_with(
            AgentInput::text("send it"),
            RunOptions::new(AgentInit::new()).principal("alice"),
        )
        .await
        .expect("the turn runs");
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    out
}

async fn approve(agent: &Agent, snapshot: &str, approver: &str) -> holdpoint::Result<Answered> {
    agent
        .decisions()
        .answer(Answer::approve(snapshot), who(approver, &["finance"]))
        .await
}

fn recorded(answered: holdpoint::Result<Answered>) -> (Vec<String>, bool) {
    match answered.expect("the approval is recorded") {
        Answered::Recorded { call, counted } => (call.approvals.into_iter().map(|a| a.actor).collect(), counted),
        Answered::Resumed(out) | Answered::Granted { output: out, .. } => {
            panic!("the quorum is not met yet, but the hold resumed: {out:?}")
        }
    }
}

/// Partial approvals land on the paused snapshot in the store (a new agent
/// on the same store reads them), are listed, audited one row each (the
/// same approver twice counts once), and are refused once the hold was
/// claimed; the approval that completes the quorum runs the call once.
pub async fn partial_approvals_are_durable_and_written_only_while_waiting(store: Arc<dyn SessionStore>) {
    let name = fresh_id("quorum");
    let moved = Arc::new(AtomicUsize::new(0));
    let first = agent(&name, Arc::clone(&store), 2, &moved);
    let out = hold(&first).await;
    let id = out.snapshot_id.clone().expect("a stored snapshot");

    assert_eq!(
        recorded(approve(&first, &id, "olga").await),
        (vec!["olga".into()], true)
    );
    assert_eq!(
        recorded(approve(&first, &id, "olga").await),
        (vec!["olga".into()], false)
    );

    // A restart between the first and the second approval loses nothing.
    let restarted = agent(&name, Arc::clone(&store), 2, &moved);
    let row = store.get_snapshot(&id).await.expect("get").expect("the row");
    assert_eq!(row.approvals.len(), 1, "{:?}", row.approvals);
    assert_eq!(row.approvals[0].actor, "olga");
    let listed = restarted
        .decisions()
        .pending(SnapshotQuery::default())
        .await
        .expect("pending lists");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tally(), "1 of 2: olga");

    let Answered::Resumed(done) = approve(&restarted, &id, "pete").await.expect("the approval") else {
        panic!("the second approver completes the quorum")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(moved.load(Ordering::SeqCst), 1);

    // Claimed: a late approval is refused and writes nothing.
    let late = HoldApproval {
        tool: "transferMoney".into(),
        reference: listed[0].reference.clone(),
        actor: "quinn".into(),
        at: Utc::now(),
    };
    let err = record_approval(audit(&*store).as_ref(), &id, late, 3, Vec::new())
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::AlreadyResumed(_)), "{err}");
    let row = store.get_snapshot(&id).await.expect("get").expect("the row");
    assert_eq!(row.approvals.len(), 1);
    let err = approve(&restarted, &id, "quinn").await.expect_err("refused");
    assert_eq!(err.status(), Status::Aborted);
    assert_eq!(moved.load(Ordering::SeqCst), 1);

    let trail = audit(&*store)
        .list_audit(&AuditQuery {
            agent: Some(name),
            ..AuditQuery::default()
        })
        .await
        .expect("list_audit");
    let mut rows: Vec<(Option<&str>, AuditDecision)> = trail.iter().map(|r| (r.actor.as_deref(), r.decision)).collect();
    rows.sort_by_key(|r| r.0);
    assert_eq!(
        rows,
        [
            (Some("olga"), AuditDecision::Approve),
            (Some("pete"), AuditDecision::Approve)
        ],
        "{trail:#?}"
    );
}

/// Over two handles on one database: two approvals short of the quorum
/// at once both land; two approvals completing it at once run the call
/// exactly once (the other is refused `ABORTED`).
pub async fn two_handles_complete_a_quorum_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let name = fresh_id("quorum-2h");
    let moved = Arc::new(AtomicUsize::new(0));
    let on_a = agent(&name, Arc::clone(&a), 3, &moved);
    let on_b = agent(&name, Arc::clone(&b), 3, &moved);
    let out = hold(&on_a).await;
    let id = out.snapshot_id.clone().expect("a stored snapshot");

    let (x, y) = tokio::join!(approve(&on_a, &id, "olga"), approve(&on_b, &id, "pete"));
    let (x, y) = (recorded(x), recorded(y));
    assert!(x.1 && y.1, "both count");
    let row = b.get_snapshot(&id).await.expect("get").expect("the row");
    let mut actors: Vec<&str> = row.approvals.iter().map(|r| r.actor.as_str()).collect();
    actors.sort_unstable();
    assert_eq!(actors, ["olga", "pete"], "both partial approvals landed");

    let (x, y) = tokio::join!(approve(&on_a, &id, "quinn"), approve(&on_b, &id, "rita"));
    let resumed = [&x, &y]
        .iter()
        .filter(|r| matches!(r, Ok(Answered::Resumed(_))))
        .count();
    assert_eq!(resumed, 1, "{x:?} {y:?}");
    let loser = if matches!(x, Ok(Answered::Resumed(_))) { y } else { x };
    assert_eq!(loser.expect_err("the other is refused").status(), Status::Aborted);
    assert_eq!(moved.load(Ordering::SeqCst), 1, "the call ran once");
}
