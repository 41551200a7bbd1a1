//! A rule's expiry where it meets the other features (docs/reference.md
//! §11.3): a quorum hold with one approval short, a rule with self-approval
//! off, a late answer after the timer decided.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, Answered, EXPIRY_ACTOR, Expired, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::{AuditDecision, AuditQuery, HoldTimers, InMemoryStore, OnExpire};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{Error, FinishReason, Role, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

/// `payBill` under a rule that needs two `finance` approvers, never the
/// owner, and denies a hold left 300 ms; the model reports the tool's reply.
fn payer() -> (Agent, Arc<AtomicUsize>) {
    let paid = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&paid);
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!({"paid": input["amount"]})) }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/timers", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let reply = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(format!("the bill: {reply}")));
        }
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": 20000})))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("big bills".into()),
        tool: Some("payBill".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
        timers: HoldTimers {
            expire_after: Some(Duration::from_millis(300)),
            on_expire: OnExpire::Deny,
            ..HoldTimers::default()
        },
        ..RuleSpec::default()
    }])
    .unwrap();
    let agent = Agent::builder("payer")
        .model(Arc::new(model))
        .tools([pay])
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    (agent, paid)
}

fn who(principal: &str, roles: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("principal".into(), json!(principal));
    m.insert("roles".into(), json!(roles));
    m
}

#[tokio::test]
async fn an_expiry_denies_a_quorum_hold_one_approval_short_once() {
    let (agent, paid) = payer();
    let held = agent
        .run_with(
            AgentInput::text("pay it"),
            RunOptions::new(AgentInit::new()).principal("alice"),
        )
        .await
        .unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let snapshot = held.snapshot_id.clone().unwrap();

    // Before its time the timer is refused and nothing changes.
    let early = agent.decisions().expire(&snapshot, None, "payBill").await;
    assert!(matches!(early, Err(Error::FailedPrecondition(_))), "{early:?}");
    let one = agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), who("olga", &["finance"]))
        .await
        .unwrap();
    assert!(matches!(one, Answered::Recorded { counted: true, .. }), "{one:?}");

    tokio::time::sleep(Duration::from_millis(400)).await;
    let expired = agent.decisions().expire(&snapshot, None, "payBill").await.unwrap();
    assert_eq!(expired, Expired::Denied, "self-approval off does not stop the timer");
    assert_eq!(paid.load(Ordering::SeqCst), 0, "a denied call never runs");

    // The timer fires again, a second approver comes late: neither acts.
    let again = agent.decisions().expire(&snapshot, None, "payBill").await.unwrap();
    assert_eq!(again, Expired::AlreadyAnswered);
    let late = agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), who("fay", &["finance"]))
        .await;
    assert!(
        matches!(late, Err(Error::AlreadyResumed(_) | Error::AlreadyAnswered(_))),
        "a late answer is told the hold was decided: {late:?}"
    );
    assert_eq!(paid.load(Ordering::SeqCst), 0);

    let trail = agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let rows: Vec<_> = trail
        .iter()
        .map(|r| (r.decision, r.actor.as_deref(), r.principal.as_deref()))
        .collect();
    assert_eq!(
        rows,
        [
            (AuditDecision::Expired, Some(EXPIRY_ACTOR), Some("alice")),
            (AuditDecision::Approve, Some("olga"), Some("alice")),
        ],
        "{trail:#?}"
    );
}
