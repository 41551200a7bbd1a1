//! Approval rules (docs/reference.md §10.5, §10.7): rules hold calls with
//! their approvers and quorum on the hold, approvers see and answer only
//! the holds their roles cover, quorums count distinct approvers, and
//! decisions say what they were.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput, Answer, Answered, RunOptions};
use holdpoint::approval::{ApprovalReply, HoldRule, Policy, RULE_GATE, RuleSpec};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{AuditDecision, AuditQuery, InMemoryStore, SessionStore, SnapshotQuery};
use holdpoint::tool::{DynamicTool, ResumableTool, Tool, ToolContext};
use holdpoint::{FinishReason, Resume, ScriptedModel, ScriptedTurn, Status};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::Transfer;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
struct Reply {
    approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feedback: Option<String>,
}

impl ApprovalReply for Reply {
    fn approve(reason: Option<String>) -> Self {
        Reply {
            approved: true,
            feedback: reason,
        }
    }
    fn deny(reason: Option<String>) -> Self {
        Reply {
            approved: false,
            feedback: reason,
        }
    }
}

struct Setup {
    agent: Agent,
    store: Arc<InMemoryStore>,
    /// Transfers really made.
    moved: Arc<AtomicUsize>,
    /// Runs of the plain tools.
    runs: Arc<AtomicUsize>,
}

fn counting(name: &str, runs: &Arc<AtomicUsize>) -> Arc<dyn Tool> {
    let runs = Arc::clone(runs);
    DynamicTool::new(
        name,
        "counts its runs",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"ok": true, "input": input}))
            }
        },
    )
    .into_tool()
}

fn transfer(moved: &Arc<AtomicUsize>) -> ResumableTool<Transfer, Value, Reply> {
    let moved = Arc::clone(moved);
    ResumableTool::define(
        "transferMoney",
        "moves money after approval",
        move |ctx: ToolContext, t: Transfer, reply: Option<Reply>| {
            let moved = Arc::clone(&moved);
            async move {
                match reply {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${} to {}", t.amount, t.to_account)})))
                    }
                    Some(r) if r.approved => {
                        moved.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"success": true}))
                    }
                    Some(r) => Err(ctx.fail(format!("declined: {}", r.feedback.unwrap_or_default()))),
                }
            }
        },
    )
    .unwrap()
    .approval_reply()
    .unwrap()
}

/// A model that calls `TOOL` with `JSON` for the user text `TOOL JSON`,
/// and says "done" after tool results.
fn model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/rules", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let text = last.text();
        let (tool, input) = text.split_once(' ')?;
        Some(ScriptedTurn::tool_call(tool, serde_json::from_str(input).ok()?))
    })
}

fn rule(tool: &str, when: &str, approvers: &[&str], quorum: u32, self_approval: bool) -> RuleSpec {
    RuleSpec {
        name: Some(format!("{tool}-rule")),
        agent: Some("bankingAgent".into()),
        tool: Some(tool.into()),
        when: Some(when.into()),
        approvers: approvers.iter().map(|s| (*s).to_owned()).collect(),
        quorum,
        self_approval,
        ..RuleSpec::default()
    }
}

fn policy() -> Policy {
    Policy::new([
        rule("transferMoney", "input.amount > 10000", &["finance"], 2, false),
        rule("getBalance", "input.account == 'vault'", &["audit"], 1, true),
        rule("closeAccount", "input.missing.deep > 1", &["support"], 1, true),
    ])
    .unwrap()
}

fn setup_with(gate: Option<ToolApproval>) -> Setup {
    let moved = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(InMemoryStore::new());
    let mut b = Agent::builder("bankingAgent")
        .model(Arc::new(model()))
        .tool(transfer(&moved))
        .tools([counting("getBalance", &runs), counting("closeAccount", &runs)])
        .approval_policy(policy())
        .store(Arc::clone(&store) as Arc<dyn SessionStore>);
    if let Some(gate) = gate {
        b = b.middleware(gate.into_middleware());
    }
    Setup {
        agent: b.build().unwrap(),
        store,
        moved,
        runs,
    }
}

fn setup() -> Setup {
    setup_with(Some(ToolApproval::allow(["getBalance", "transferMoney"])))
}

fn who(principal: &str, roles: &[&str]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("principal".into(), json!(principal));
    if !roles.is_empty() {
        m.insert("roles".into(), json!(roles));
    }
    m
}

async fn ask(s: &Setup, owner: &str, text: &str) -> AgentOutput {
    let options = RunOptions::new(AgentInit::new()).principal(owner);
    s.agent.run_with(AgentInput::text(text), options).await.unwrap()
}

fn held_rule(out: &AgentOutput) -> HoldRule {
    let paused = out.interrupts();
    assert_eq!(paused.len(), 1, "{out:?}");
    HoldRule::on(&paused[0]).expect("the hold records its rule")
}

fn snapshot(out: &AgentOutput) -> String {
    out.snapshot_id.clone().unwrap()
}

#[tokio::test]
async fn a_rule_holds_a_call_the_allowlist_lets_through_and_records_its_rule() {
    let s = setup();
    let out = ask(&s, "alice", r#"getBalance {"account": "vault"}"#).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let part = &out.interrupts()[0];
    assert_eq!(part.interrupted_by(), Some(RULE_GATE));
    let meta = part.metadata.as_ref().unwrap();
    assert_eq!(
        meta["approvalRule"],
        json!({"rule": "getBalance-rule", "approvers": ["audit"], "quorum": 1, "selfApproval": true})
    );
    // The interrupt data keeps the Genkit shape: the rule is not in it.
    assert_eq!(
        part.interrupt_data().unwrap().keys().collect::<Vec<_>>(),
        ["message"],
        "only the gate's own message"
    );

    // No match: today's behaviour (the allowlist lets it run).
    let out = ask(&s, "alice", r#"getBalance {"account": "checking"}"#).await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_rule_holds_calls_of_an_agent_without_tool_approval_and_its_approval_runs_them() {
    let s = setup_with(None);
    let out = ask(&s, "alice", r#"getBalance {"account": "vault"}"#).await;
    assert_eq!(held_rule(&out).rule, "getBalance-rule");
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    // Self-approval is on for this rule: the owner may answer.
    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot(&out)), who("alice", &[]))
        .await
        .unwrap();
    let Answered::Resumed(done) = answered else {
        panic!("quorum 1 resumes")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_condition_that_fails_to_evaluate_holds_the_call_with_the_error() {
    let s = setup_with(None);
    let out = ask(&s, "alice", r#"closeAccount {"id": 1}"#).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let rule = held_rule(&out);
    assert_eq!(rule.rule, "closeAccount-rule");
    assert!(
        rule.error
            .as_deref()
            .is_some_and(|e| e.contains("could not be evaluated")),
        "{rule:?}"
    );
    let data = out.interrupts()[0].interrupt_data().unwrap();
    assert!(
        data["message"].as_str().unwrap().contains("condition failed"),
        "{data:?}"
    );
}

#[tokio::test]
async fn a_resumable_tools_own_interrupt_carries_the_rule_and_its_reply() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 50000, "toAccount": "x"}"#).await;
    let part = &out.interrupts()[0];
    assert_eq!(part.interrupted_by(), None, "the tool's own interrupt");
    assert_eq!(
        part.interrupt_data().unwrap(),
        json!({"details": "Transfer $50000 to x"}).as_object().unwrap().clone(),
        "the tool's own interrupt data, nothing of the rule in it (reference §10.5)"
    );
    assert_eq!(held_rule(&out).quorum, 2);
    assert_eq!(
        part.metadata.as_ref().unwrap()["approvalReply"],
        json!({"approve": {"approved": true}, "deny": {"approved": false}, "reason": "feedback"})
    );
    // A small transfer is matched by no rule: no rule on its hold.
    let small = ask(&s, "alice", r#"transferMoney {"amount": 500, "toAccount": "x"}"#).await;
    assert!(HoldRule::on(&small.interrupts()[0]).is_none());
}

#[tokio::test]
async fn approvers_see_and_read_only_the_holds_their_roles_cover() {
    let s = setup();
    let big = ask(&s, "alice", r#"transferMoney {"amount": 50000, "toAccount": "x"}"#).await;
    let small = ask(&s, "alice", r#"transferMoney {"amount": 500, "toAccount": "x"}"#).await;
    let bobs = ask(&s, "bob", r#"transferMoney {"amount": 20000, "toAccount": "y"}"#).await;
    let roles = vec!["finance".to_owned()];
    let olga = Access::Caller {
        principal: Some("olga"),
        roles: &roles,
    };
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), olga)
        .await
        .unwrap();
    let mut ids: Vec<String> = listed.iter().map(|p| p.snapshot_id.clone()).collect();
    ids.sort();
    let mut want = vec![snapshot(&big), snapshot(&bobs)];
    want.sort();
    assert_eq!(ids, want, "finance sees both big transfers, not the small one");
    assert_eq!(listed[0].rule.as_ref().unwrap().approvers, ["finance"]);
    assert!(s.agent.snapshot(&snapshot(&big), olga).await.unwrap().is_some());
    assert!(s.agent.latest_snapshot(&big.session_id, olga).await.unwrap().is_some());
    assert!(s.agent.snapshot(&snapshot(&small), olga).await.unwrap().is_none());
    // An approver may not abort the session it may read.
    assert_eq!(s.agent.abort(&snapshot(&big), olga).await.unwrap(), None);

    // A customer sees their own, never another's.
    let no_roles: Vec<String> = Vec::new();
    let bob = Access::Caller {
        principal: Some("bob"),
        roles: &no_roles,
    };
    let listed = s
        .agent
        .decisions()
        .pending_for(SnapshotQuery::default(), bob)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].snapshot_id, snapshot(&bobs));
    assert!(s.agent.snapshot(&snapshot(&big), bob).await.unwrap().is_none());
    let err = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot(&big)), who("bob", &[]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "{err}");
}

#[tokio::test]
async fn a_quorum_needs_distinct_approvers_and_never_the_owner() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 50000, "toAccount": "x"}"#).await;
    let id = snapshot(&out);

    // The owner (even with a finance role) may not approve.
    let err = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("alice", &["finance"]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::PermissionDenied);
    assert!(err.to_string().contains("transferMoney-rule"), "{err}");
    // Nor may someone without the role.
    let err = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("sam", &["support"]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "the hold is invisible to them: {err}");
    // Nor may the owner bypass it with a hand-written resume.
    let part = out.interrupts()[0].restart(Some(json!({"approved": true}))).unwrap();
    let options = RunOptions::new(AgentInit::session(out.session_id.clone())).principal("alice");
    let err = s
        .agent
        .run_with(AgentInput::resume(Resume::from_parts(vec![part])), options)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::PermissionDenied, "{err}");
    assert_eq!(s.moved.load(Ordering::SeqCst), 0);

    let Answered::Recorded { call, counted } = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("olga", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("one approval of two is recorded")
    };
    assert!(counted);
    assert_eq!(call.tally(), "1 of 2: olga");
    let Answered::Recorded { call, counted } = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("olga", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("the same approver again does not complete it")
    };
    assert!(!counted);
    assert_eq!(call.tally(), "1 of 2: olga");
    let listed = s.agent.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(listed[0].approvals.len(), 1);
    assert!(listed[0].to_string().contains("1 of 2: olga"), "{}", listed[0]);
    assert_eq!(s.moved.load(Ordering::SeqCst), 0);

    let Answered::Resumed(done) = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("pete", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("the second approver completes it")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.moved.load(Ordering::SeqCst), 1);
    let trail = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let mut rows: Vec<(Option<String>, AuditDecision)> = trail.iter().map(|r| (r.actor.clone(), r.decision)).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        rows,
        [
            (Some("olga".into()), AuditDecision::Approve),
            (Some("pete".into()), AuditDecision::Approve)
        ]
    );
    assert!(trail.iter().all(|r| r.principal.as_deref() == Some("alice")));
    // Decided: nothing more to answer.
    let err = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("quinn", &["finance"]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Aborted, "{err}");
    assert_eq!(s.moved.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn any_authorised_denial_ends_the_hold_recorded_as_deny() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 50000, "toAccount": "x"}"#).await;
    let id = snapshot(&out);
    let Answered::Recorded { .. } = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("olga", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("recorded")
    };
    let denial = Answer::deny(&id, Some("looks like fraud"));
    let Answered::Resumed(done) = s
        .agent
        .decisions()
        .answer(denial, who("pete", &["finance"]))
        .await
        .unwrap()
    else {
        panic!("a denial decides")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.moved.load(Ordering::SeqCst), 0, "no transaction is made");
    let trail = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let deny = trail
        .iter()
        .find(|r| r.decision == AuditDecision::Deny)
        .expect("a deny row");
    assert_eq!(deny.actor.as_deref(), Some("pete"));
    assert_eq!(deny.reason.as_deref(), Some("looks like fraud"));
}

#[tokio::test]
async fn a_denied_transfer_without_a_rule_is_recorded_deny() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 500, "toAccount": "x"}"#).await;
    let Answered::Resumed(_) = s
        .agent
        .decisions()
        .answer(Answer::deny(snapshot(&out), Some("not now")), who("alice", &[]))
        .await
        .unwrap()
    else {
        panic!("resumed")
    };
    assert_eq!(s.moved.load(Ordering::SeqCst), 0);
    let trail = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].decision, AuditDecision::Deny);
    assert_eq!(trail[0].reason.as_deref(), Some("not now"));
    assert_eq!(trail[0].actor.as_deref(), Some("alice"));
}

#[tokio::test]
async fn two_approvers_completing_a_quorum_at_once_run_the_call_once() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 50000, "toAccount": "x"}"#).await;
    let id = snapshot(&out);
    let _ = s
        .agent
        .decisions()
        .answer(Answer::approve(&id), who("olga", &["finance"]))
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        s.agent
            .decisions()
            .answer(Answer::approve(&id), who("pete", &["finance"])),
        s.agent
            .decisions()
            .answer(Answer::approve(&id), who("quinn", &["finance"])),
    );
    let resumed = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Ok(Answered::Resumed(_))))
        .count();
    assert_eq!(resumed, 1, "{a:?} {b:?}");
    let loser = if a.is_ok() { b } else { a };
    assert_eq!(loser.unwrap_err().status(), Status::Aborted);
    assert_eq!(s.moved.load(Ordering::SeqCst), 1);
    let _ = &s.store;
}

#[tokio::test]
async fn an_expired_hold_cannot_be_approved() {
    let moved = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model()))
        .tool(transfer(&moved))
        .tools([counting("closeAccount", &runs)])
        .middleware(
            ToolApproval::allow(["transferMoney"])
                .ttl(std::time::Duration::ZERO)
                .into_middleware(),
        )
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let options = RunOptions::new(AgentInit::new()).principal("alice");
    let out = agent
        .run_with(AgentInput::text(r#"closeAccount {"id": 1}"#), options)
        .await
        .unwrap();
    let err = agent
        .decisions()
        .answer(Answer::approve(snapshot(&out)), who("alice", &[]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("expired"), "{err}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_rules_approval_releases_the_call_through_tool_approval_inside_it() {
    // closeAccount is outside ToolApproval's allowlist; the rule (held
    // because its condition fails) is answered by support, and the call
    // runs without ToolApproval asking again.
    let s = setup();
    let out = ask(&s, "alice", r#"closeAccount {"id": 1}"#).await;
    assert_eq!(out.interrupts()[0].interrupted_by(), Some(RULE_GATE));
    let answered = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot(&out)), who("sam", &["support"]))
        .await
        .unwrap();
    let Answered::Resumed(done) = answered else {
        panic!("quorum 1 resumes")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

/// An approver's edit of a tool's own question under a quorum rule never
/// runs the revised call on one approval: it is held again for the rule.
#[tokio::test]
async fn an_edit_under_a_quorum_rule_is_held_again_not_run() {
    let s = setup();
    let out = ask(&s, "alice", r#"transferMoney {"amount": 25000, "toAccount": "x"}"#).await;
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let part = &out.interrupts()[0];
    let edited = part
        .restart_with_input(
            json!({"amount": 40000, "toAccount": "x"}),
            Some(json!({"approved": true})),
        )
        .unwrap();
    let result = s
        .agent
        .run_with(
            AgentInput::resume(Resume::from_parts([edited])),
            RunOptions::new(AgentInit::snapshot(snapshot(&out))).context(who("fiona", &["finance"])),
        )
        .await;
    assert_eq!(
        s.moved.load(Ordering::SeqCst),
        0,
        "one approver's edit ran it: {result:?}"
    );
    let out = result.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    assert_eq!(held_rule(&out).quorum, 2);
    // The tool asked again, about the revised call.
    assert_eq!(
        out.interrupts()[0].interrupt_data().unwrap()["details"],
        "Transfer $40000 to x"
    );
    // Two approvers decide it; it runs once, as revised.
    let first = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot(&out)), who("fiona", &["finance"]))
        .await
        .unwrap();
    assert!(matches!(first, Answered::Recorded { .. }), "{first:?}");
    assert_eq!(s.moved.load(Ordering::SeqCst), 0);
    let second = s
        .agent
        .decisions()
        .answer(Answer::approve(snapshot(&out)), who("frank", &["finance"]))
        .await
        .unwrap();
    let Answered::Resumed(done) = second else {
        panic!("the quorum is met: {second:?}")
    };
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(s.moved.load(Ordering::SeqCst), 1);
}
