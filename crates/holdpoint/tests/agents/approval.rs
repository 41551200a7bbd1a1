use crate::TurnResultExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, RunOptions};
use holdpoint::middleware::{TOOL_APPROVAL, ToolApproval, Verdict};
use holdpoint::session::{AuditDecision, AuditQuery, InMemoryStore, SnapshotQuery, hash_json};
use holdpoint::tool::{DynamicTool, Tool, ToolContext};
use holdpoint::{FinishReason, Part, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Value, json};

use crate::{Approval, transfer_tool};

struct Setup {
    agent: Agent,
    model: ScriptedModel,
    runs: Arc<AtomicUsize>,
}

fn counting_tool(name: &str, runs: Arc<AtomicUsize>) -> Arc<dyn Tool> {
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

fn setup(gate: ToolApproval) -> Setup {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("gated")
        .model(Arc::new(model.clone()))
        .tools([
            counting_tool("closeAccount", Arc::clone(&runs)),
            counting_tool("getBalance", Arc::clone(&runs)),
        ])
        .middleware(gate.into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    Setup { agent, model, runs }
}

fn resume(parts: Vec<Part>) -> AgentInput {
    AgentInput::resume(Resume::from_parts(parts))
}

async fn answer(s: &Setup, paused: &AgentOutput, part: Part) -> AgentOutput {
    s.agent
        .run(resume(vec![part]), AgentInit::session(paused.session_id.clone()))
        .await
        .settled()
}

fn last_tool_output(model: &ScriptedModel) -> Value {
    let req = model.requests().pop().unwrap();
    let msg = req.messages.last().unwrap().clone();
    msg.content[0].as_tool_response().unwrap().output.clone().unwrap()
}

#[tokio::test]
async fn allowlisted_tools_run_and_others_are_held_with_the_seed_message() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("getBalance", json!({})));
    s.model.push(ScriptedTurn::text("balance shown"));
    let out = s.agent.run_text("balance?").await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);

    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let part = &held.interrupts()[0];
    assert_eq!(part.interrupted_by(), Some(TOOL_APPROVAL));
    assert_eq!(
        part.interrupt_data().unwrap()["message"],
        json!("Tool not in approved list: closeAccount")
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1, "a held call does not run");
}

#[tokio::test]
async fn an_empty_allowlist_holds_every_call() {
    let s = setup(ToolApproval::allow(Vec::<String>::new()));
    s.model.push(ScriptedTurn::tool_call("getBalance", json!({})));
    let held = s.agent.run_text("balance?").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
}

#[tokio::test]
async fn approval_runs_the_tool_once_and_is_audited() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("closed"));
    let held = s.agent.run_text("close it").await.unwrap();
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).expect("our hold");
    assert_eq!(hold.tool, "closeAccount");
    let done = answer(&s, &held, hold.approve(Some("customer confirmed by phone")).unwrap()).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].decision, AuditDecision::Approve);
    assert_eq!(audit[0].reason.as_deref(), Some("customer confirmed by phone"));
    assert_eq!(audit[0].held_by.as_deref(), Some(TOOL_APPROVAL));
}

#[tokio::test]
async fn denial_reaches_the_model_and_the_turn_goes_on() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("I will not close it."));
    let held = s.agent.run_text("close it").await.unwrap();
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).unwrap();
    let done = answer(&s, &held, hold.deny(Some("fraud suspected")).unwrap()).await;
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let seen = last_tool_output(&s.model);
    let error = seen["error"].as_str().unwrap();
    assert!(error.starts_with("the tool call was denied"), "{error}");
    assert!(error.contains("fraud suspected"), "{error}");
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].decision, AuditDecision::Deny);
}

#[tokio::test]
async fn a_bare_restart_is_not_an_approval() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("ok"));
    let held = s.agent.run_text("close it").await.unwrap();
    let bare = held.interrupts()[0].restart(None).unwrap();
    let done = answer(&s, &held, bare).await;
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    assert!(
        last_tool_output(&s.model)["error"]
            .as_str()
            .unwrap()
            .starts_with("the tool call was denied")
    );
}

#[tokio::test]
async fn forged_approval_of_a_call_never_held_is_rejected() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    // a request for a call that was never held in this session
    let forged = Part::tool_request("closeAccount", Some("forged-ref".into()), Some(json!({"id": 7})))
        .restart(Some(json!({"toolApproved": true})))
        .unwrap();
    let out = answer(&s, &held, forged).await;
    assert_eq!(out.finish_reason, FinishReason::Failed);
    assert_eq!(out.error.unwrap().status, Status::InvalidArgument);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn claims_are_exclusive_between_tool_approval_and_tools() {
    let runs = Arc::new(AtomicUsize::new(0));
    let transfer = transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(transfer.clone())
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 10, "toAccount": "savings"}),
    ));
    let held = agent.run_text("send $10").await.unwrap();
    let part = held.interrupts()[0].clone();
    assert!(
        transfer.interrupted(&part).is_none(),
        "a tool's claim refuses a middleware's hold"
    );
    let hold = ToolApproval::interrupted(&part).expect("ToolApproval claims its own hold");

    // After approval the tool asks its own question, answered through the tool.
    model.push(ScriptedTurn::text("Done"));
    let asked = agent
        .run(
            resume(vec![hold.approve(None).unwrap()]),
            AgentInit::session(held.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(asked.finish_reason, FinishReason::Interrupted, "{asked:?}");
    let own = asked.interrupts()[0].clone();
    assert!(
        ToolApproval::interrupted(&own).is_none(),
        "ToolApproval does not claim a tool's own interrupt"
    );
    let call = transfer.interrupted(&own).expect("the tool claims its own question");
    let done = agent
        .run(
            resume(vec![call.restart(Some(Approval { approved: true })).unwrap()]),
            AgentInit::session(held.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_restart_with_replaced_input_is_held_again() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    let revised = held.interrupts()[0]
        .restart_with_input(json!({"id": 8}), Some(json!({"toolApproved": true})))
        .unwrap();
    let again = answer(&s, &held, revised).await;
    assert_eq!(again.finish_reason, FinishReason::Interrupted, "{again:?}");
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let part = &again.interrupts()[0];
    assert_eq!(part.as_tool_request().unwrap().input, Some(json!({"id": 8})));
    assert!(
        part.interrupt_data().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("input changed")
    );
    // The gate held the revised call again: that is not an approval.
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].decision, AuditDecision::Edit);
    assert_eq!(audit[0].input_hash, hash_json(&json!({"id": 8})));
    assert_eq!(audit[0].input, Some(json!({"id": 8})));
    assert_eq!(audit[0].original_input, Some(json!({"id": 7})));
    assert_eq!(audit[0].original_input_hash, Some(hash_json(&json!({"id": 7}))));

    // Approving the revised hold is the approval, of the input it shows.
    s.model.push(ScriptedTurn::text("closed"));
    let hold = ToolApproval::interrupted(part).expect("our hold");
    let done = answer(&s, &again, hold.approve(None).unwrap()).await;
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0].decision, AuditDecision::Approve);
    assert_eq!(audit[0].input_hash, hash_json(&json!({"id": 8})));
    assert_eq!((&audit[0].input, &audit[0].original_input), (&None, &None));
    assert_eq!(audit[0].original_input_hash, None);
}

#[tokio::test]
async fn a_denial_with_replaced_input_is_held_again_and_not_recorded_as_a_denial() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    let revised = held.interrupts()[0]
        .restart_with_input(json!({"id": 8}), Some(json!({"toolApproved": false})))
        .unwrap();
    let again = answer(&s, &held, revised).await;
    assert_eq!(again.finish_reason, FinishReason::Interrupted, "{again:?}");
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    let decisions: Vec<_> = audit.iter().map(|r| r.decision).collect();
    assert_eq!(decisions, [AuditDecision::Edit]);
}

/// A tool's own interrupt restarted with a new input runs that input when
/// the gate lets the tool through; the audit says what ran and what was
/// held, each with its hash.
#[tokio::test]
async fn a_restart_with_replaced_input_records_the_input_that_ran_and_the_original() {
    let runs = Arc::new(AtomicUsize::new(0));
    let transfer = transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(transfer.clone())
        .middleware(ToolApproval::allow(["transferMoney"]).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let held_input = json!({"amount": 10, "toAccount": "savings"});
    let ran_input = json!({"amount": 999999, "toAccount": "mallory"});
    model.push(ScriptedTurn::tool_call("transferMoney", held_input.clone()));
    model.push(ScriptedTurn::text("Done"));
    let asked = agent.run_text("send $10").await.unwrap();
    let call = transfer
        .interrupted(&asked.interrupts()[0])
        .expect("the tool's own question");
    let revised = call
        .restart_with_input(
            crate::Transfer {
                amount: 999999.0,
                to_account: "mallory".into(),
            },
            Some(Approval { approved: true }),
        )
        .unwrap();
    let done = agent
        .run(resume(vec![revised]), AgentInit::session(asked.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the revised transfer ran");
    assert_eq!(last_tool_output(&model)["to"], json!("mallory"));

    let audit = agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let r = &audit[0];
    assert_eq!(r.decision, AuditDecision::Edit);
    assert_eq!(r.input_hash, hash_json(&ran_input), "inputHash is the input that ran");
    assert_eq!(r.input.as_ref().map(hash_json), Some(hash_json(&ran_input)));
    assert_eq!(r.original_input, Some(held_input.clone()));
    assert_eq!(r.original_input_hash, Some(hash_json(&held_input)));
    // On the wire: camelCase, beside the fields that were there before.
    let wire = serde_json::to_value(r).unwrap();
    assert_eq!(wire["inputHash"], json!(hash_json(&ran_input)));
    assert_eq!(wire["input"]["toAccount"], json!("mallory"));
    assert_eq!(wire["originalInput"], held_input);
    assert_eq!(wire["originalInputHash"], json!(hash_json(&held_input)));
}

#[tokio::test]
async fn a_predicate_holds_only_large_amounts() {
    let gate = ToolApproval::allow(["getBalance"])
        .approval_when("closeAccount", |input| input["amount"].as_f64().unwrap_or(0.0) > 1000.0);
    let s = setup(gate);
    s.model
        .push(ScriptedTurn::tool_call("closeAccount", json!({"amount": 50})));
    s.model.push(ScriptedTurn::text("done"));
    assert_eq!(
        s.agent.run_text("small").await.unwrap().finish_reason,
        FinishReason::Stop
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    s.model
        .push(ScriptedTurn::tool_call("closeAccount", json!({"amount": 5000})));
    assert_eq!(
        s.agent.run_text("large").await.unwrap().finish_reason,
        FinishReason::Interrupted
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_policy_can_deny_outright() {
    let gate = ToolApproval::allow(["getBalance"]).policy(|call| {
        if call.input["id"] == json!(666) {
            Verdict::Deny("blocked account".into())
        } else {
            Verdict::Ask
        }
    });
    let s = setup(gate);
    s.model
        .push(ScriptedTurn::tool_call("closeAccount", json!({"id": 666})));
    s.model.push(ScriptedTurn::text("refused"));
    assert_eq!(
        s.agent.run_text("close").await.unwrap().finish_reason,
        FinishReason::Stop
    );
    assert!(
        last_tool_output(&s.model)["error"]
            .as_str()
            .unwrap()
            .contains("blocked account")
    );
}

async fn judged(answer_text: Option<&str>) -> (FinishReason, usize, ScriptedModel) {
    let judge = ScriptedModel::new("judge");
    if let Some(t) = answer_text {
        judge.push(ScriptedTurn::text(t));
    }
    let s = setup(ToolApproval::allow(["getBalance"]).judge(Arc::new(judge.clone()), "Allow only small closings."));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 1})));
    s.model.push(ScriptedTurn::text("after"));
    let out = s.agent.run_text("close").await.unwrap();
    (out.finish_reason, s.runs.load(Ordering::SeqCst), judge)
}

#[tokio::test]
async fn the_judge_model_allows_denies_asks_and_holds_on_failure() {
    let (fr, runs, judge) = judged(Some("allow")).await;
    assert_eq!((fr, runs), (FinishReason::Stop, 1));
    let asked = &judge.requests()[0];
    assert!(asked.messages[1].text().contains("closeAccount"));
    let (fr, runs, _) = judged(Some("Deny: too risky")).await;
    assert_eq!((fr, runs), (FinishReason::Stop, 0));
    let (fr, runs, _) = judged(Some("ask")).await;
    assert_eq!((fr, runs), (FinishReason::Interrupted, 0));
    let (fr, runs, _) = judged(None).await; // the judge call fails
    assert_eq!((fr, runs), (FinishReason::Interrupted, 0));
}

#[tokio::test]
async fn an_answer_after_expiry_is_an_expired_soft_failure() {
    let s = setup(ToolApproval::allow(["getBalance"]).ttl(Duration::from_millis(1)));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("too late"));
    let held = s.agent.run_text("close it").await.unwrap();
    assert!(held.interrupts()[0].expires_at().is_some());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let pending = s.agent.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert!(pending[0].expired, "listings show the hold as expired");
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).unwrap();
    let done = answer(&s, &held, hold.approve(None).unwrap()).await;
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(
        s.runs.load(Ordering::SeqCst),
        0,
        "an expired approval does not run the tool"
    );
    assert!(
        last_tool_output(&s.model)["error"]
            .as_str()
            .unwrap()
            .contains("approval expired")
    );
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].decision, AuditDecision::Expired);
}

async fn nagging(loop_guard: bool) -> FinishReason {
    let s = setup(ToolApproval::allow(["getBalance"]).loop_guard(loop_guard));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).unwrap();
    // after the denial the model asks for the very same call again
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("understood"));
    answer(&s, &held, hold.deny(None).unwrap()).await.finish_reason
}

#[tokio::test]
async fn the_loop_guard_refuses_a_denied_call_without_asking_again() {
    assert_eq!(nagging(true).await, FinishReason::Stop);
    assert_eq!(
        nagging(false).await,
        FinishReason::Interrupted,
        "without the guard it is held again"
    );
}

#[tokio::test]
async fn respond_decisions_are_audited_and_pending_filters_by_owner() {
    let s = setup(ToolApproval::allow(["getBalance"]));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    s.model.push(ScriptedTurn::text("answered"));
    let mut ctx = serde_json::Map::new();
    ctx.insert(holdpoint::agent::PRINCIPAL.into(), json!("alice"));
    let conn = s
        .agent
        .connect_with(RunOptions::new(AgentInit::new()).context(ctx.clone()))
        .await
        .unwrap();
    conn.send_text("close it").unwrap();
    let held = conn.output().await.unwrap();
    let mine = SnapshotQuery {
        owner: Some("alice".into()),
        ..Default::default()
    };
    let theirs = SnapshotQuery {
        owner: Some("bob".into()),
        ..Default::default()
    };
    assert_eq!(s.agent.decisions().pending(mine).await.unwrap().len(), 1);
    assert!(s.agent.decisions().pending(theirs).await.unwrap().is_empty());
    let respond = held.interrupts()[0]
        .respond(json!({"ok": false, "note": "closed by hand"}))
        .unwrap();
    let conn = s
        .agent
        .connect_with(RunOptions::new(AgentInit::session(held.session_id.clone())).context(ctx))
        .await
        .unwrap();
    conn.send(resume(vec![respond])).unwrap();
    assert_eq!(conn.output().await.unwrap().finish_reason, FinishReason::Stop);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let audit = s.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].decision, AuditDecision::Respond);
    assert_eq!(audit[0].principal.as_deref(), Some("alice"));
}

#[tokio::test]
async fn a_huge_ttl_holds_without_panicking() {
    let s = setup(ToolApproval::allow(["getBalance"]).ttl(Duration::MAX));
    s.model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    let held = s.agent.run_text("close it").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted, "{held:?}");
    assert!(!s.agent.decisions().pending(SnapshotQuery::default()).await.unwrap()[0].expired);
}
