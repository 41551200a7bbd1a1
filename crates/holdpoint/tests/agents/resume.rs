use crate::TurnResultExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput, RunOptions};
use holdpoint::message::metadata;
use holdpoint::session::{SessionStore, Snapshot, SnapshotStatus};
use holdpoint::{FinishReason, Part, Resume, ScriptedTurn, Status};
use serde_json::json;

use crate::{Approval, Transfer, approve, bank};

fn resume(parts: Vec<Part>) -> AgentInput {
    AgentInput::resume(Resume::from_parts(parts))
}

/// The snapshot a failed resume of `paused` wrote (`failed` is that run's
/// output): checked to be FAILED and a child of the paused snapshot.
async fn failed_child(agent: &Agent, failed: &AgentOutput, paused: &AgentOutput) -> Snapshot {
    let snap = agent
        .snapshot(failed.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.status, SnapshotStatus::Failed);
    assert_eq!(snap.parent_id, paused.snapshot_id);
    snap
}

#[tokio::test]
async fn approved_transfer_runs_once_and_finishes() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done: txn-123"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    assert_eq!(b.runs.load(Ordering::SeqCst), 0);
    let done = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(done.text(), "Done: txn-123");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
    // the answered request is kept in history as resolved
    let snap = b
        .store
        .get_snapshot(done.snapshot_id.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.parent_id, paused.snapshot_id);
    let history = snap.state.unwrap().messages;
    let request = history[1].content[0].clone();
    assert!(request.meta(metadata::RESOLVED_INTERRUPT).is_some());
    assert!(!request.is_interrupt());
}

#[tokio::test]
async fn second_resume_of_the_same_snapshot_is_aborted() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    b.model.push(ScriptedTurn::text("Done again"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let snap = paused.snapshot_id.clone().unwrap();
    let first = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::snapshot(snap.clone()),
        )
        .await
        .unwrap();
    assert_eq!(first.finish_reason, FinishReason::Stop);
    let second = b
        .agent
        .run(resume(vec![approve(&b.tool, &paused)]), AgentInit::snapshot(snap))
        .await
        .failed();
    assert_eq!(second.finish_reason, FinishReason::Failed);
    let err = second.error.unwrap();
    assert_eq!(err.status, Status::Aborted);
    assert!(err.message.contains("already resumed"), "{}", err.message);
    assert_eq!(
        b.runs.load(Ordering::SeqCst),
        1,
        "the approved transfer ran exactly once"
    );
}

async fn rejected(b: &crate::Bank, session_id: &str, parts: Vec<Part>, needle: &str) {
    let rows_before = b.store.len();
    let latest_before = b.agent.latest_snapshot(session_id, Access::Full).await.unwrap();
    let out = b
        .agent
        .run(resume(parts), AgentInit::session(session_id))
        .await
        .failed();
    assert_eq!(out.finish_reason, FinishReason::Failed, "{out:?}");
    let err = out.error.unwrap();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(
        err.message.contains(needle),
        "{:?} should contain {needle:?}",
        err.message
    );
    // the session is exactly as it was: nothing written, nothing claimed
    assert_eq!(b.store.len(), rows_before);
    let latest_after = b.agent.latest_snapshot(session_id, Access::Full).await.unwrap();
    assert_eq!(latest_before, latest_after);
    assert_eq!(b.runs.load(Ordering::SeqCst), 0);
}

async fn paused_bank() -> (crate::Bank, holdpoint::agent::AgentOutput) {
    let b = bank();
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    (b, paused)
}

#[tokio::test]
async fn forged_input_is_rejected_and_nothing_changes() {
    let (b, paused) = paused_bank().await;
    let mut forged = approve(&b.tool, &paused);
    forged.as_tool_request_mut().unwrap().input = Some(json!({"amount": 50000, "toAccount": "mallory"}));
    rejected(&b, &paused.session_id, vec![forged], "modified inputs").await;
}

#[tokio::test]
async fn unknown_ref_is_not_found_in_history() {
    let (b, paused) = paused_bank().await;
    let mut wrong = approve(&b.tool, &paused);
    wrong.as_tool_request_mut().unwrap().reference = Some("nope".into());
    rejected(&b, &paused.session_id, vec![wrong], "not found in session history").await;
}

#[tokio::test]
async fn respond_to_a_call_that_does_not_exist_is_rejected() {
    let (b, paused) = paused_bank().await;
    let fake = Part::tool_response("fakeTool", Some("x".into()), Some(json!({})));
    rejected(&b, &paused.session_id, vec![fake], "not found in session history").await;
}

#[tokio::test]
async fn declared_input_change_is_accepted_and_the_tool_sees_it() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let call = b.tool.interrupted(&paused.interrupts()[0]).unwrap();
    let revised = call
        .restart_with_input(
            Transfer {
                amount: 400.0,
                to_account: "checking".into(),
            },
            Some(Approval { approved: true }),
        )
        .unwrap();
    assert!(revised.meta(metadata::REPLACED_INPUT).is_some());
    let done = b
        .agent
        .run(resume(vec![revised]), AgentInit::session(paused.session_id))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let last_request = b.model.requests().pop().unwrap();
    let tool_msg = last_request.messages.last().unwrap();
    assert_eq!(
        tool_msg.content[0].as_tool_response().unwrap().output.as_ref().unwrap()["to"],
        json!("checking")
    );
}

#[tokio::test]
async fn resuming_an_earlier_turn_is_rejected_as_no_longer_pending() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    b.model.push(ScriptedTurn::text("Anything else?"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let directive = approve(&b.tool, &paused);
    let conn = b
        .agent
        .connect(AgentInit::session(paused.session_id.clone()))
        .await
        .unwrap();
    conn.send(resume(vec![directive.clone()])).unwrap();
    conn.send_text("thanks").unwrap();
    let out = conn.output().await.unwrap();
    assert_eq!(out.text(), "Anything else?");
    let stale = b
        .agent
        .run(resume(vec![directive]), AgentInit::session(paused.session_id))
        .await
        .failed();
    assert_eq!(stale.finish_reason, FinishReason::Failed);
    assert!(stale.error.unwrap().message.contains("no longer pending"));
}

#[tokio::test]
async fn unanswered_interrupt_is_rejected() {
    let b = bank();
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    // a resume that answers nothing the turn is waiting for
    let out = b
        .agent
        .run(
            AgentInput::resume(Resume::default()),
            AgentInit::session(paused.session_id.clone()),
        )
        .await;
    assert_eq!(
        out.unwrap_err().status(),
        Status::InvalidArgument,
        "an empty resume is not an input"
    );
}

#[tokio::test]
async fn declined_transfer_is_a_soft_failure_the_model_sees() {
    let b = bank();
    b.model.push(ScriptedTurn::text("I did not transfer anything."));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let call = b.tool.interrupted(&paused.interrupts()[0]).unwrap();
    let deny = call.restart(Some(Approval { approved: false })).unwrap();
    let out = b
        .agent
        .run(resume(vec![deny]), AgentInit::session(paused.session_id))
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop);
    let seen = b.model.requests().pop().unwrap();
    let response = seen.messages.last().unwrap().content[0]
        .as_tool_response()
        .unwrap()
        .clone();
    assert_eq!(response.output, Some(json!({"error": "declined"})));
    assert_eq!(b.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn failure_after_the_tool_ran_keeps_its_result_and_never_reruns_it() {
    let b = bank();
    // No model response is queued after the tool: the resume fails after the
    // approved transfer ran. The failed snapshot keeps the tool round.
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let failed = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .failed();
    assert_eq!(failed.finish_reason, FinishReason::Failed);
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
    let failed_snap = failed_child(&b.agent, &failed, &paused).await;
    let kept = failed_snap.state.unwrap().messages;
    let last = kept.last().unwrap();
    assert_eq!(last.role, holdpoint::Role::Tool, "the completed tool round is kept");
    assert_eq!(
        last.content[0].as_tool_response().unwrap().output.as_ref().unwrap()["transactionId"],
        json!("txn-123")
    );

    // Approving again is refused: nothing is waiting any more.
    let again = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .failed();
    assert_eq!(again.finish_reason, FinishReason::Failed);
    assert!(again.error.unwrap().message.contains("not waiting"));
    // The conversation goes on from the kept round; the tool is not re-run.
    b.model.push(ScriptedTurn::text("Done: txn-123"));
    let done = b
        .agent
        .run(AgentInput::text("did it work?"), AgentInit::session(paused.session_id))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1, "the transfer ran exactly once");
    let _ = Arc::clone(&b.runs);
}

#[tokio::test]
async fn a_resume_failing_before_any_tool_round_keeps_the_paused_conversation() {
    // The resumed call fails hard: the run fails after its claim but before
    // any tool round completed. The failed snapshot holds the conversation
    // as it was paused (read back from the store), so nothing is lost.
    let tool = holdpoint::ResumableTool::<serde_json::Value, serde_json::Value, Approval>::define(
        "transferMoney",
        "Transfers money",
        |ctx: holdpoint::ToolContext, _input: serde_json::Value, approval: Option<Approval>| async move {
            match approval {
                None => Err(ctx.interrupt(json!({"details": "Transfer $500.00 to savings"}))),
                Some(_) => Err(holdpoint::ToolError::Error("the bank is down".into())),
            }
        },
    )
    .unwrap();
    let model = holdpoint::ScriptedModel::new("scripted");
    model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500})));
    let store = Arc::new(holdpoint::session::InMemoryStore::new());
    let agent = holdpoint::agent::Agent::builder("bank")
        .model(Arc::new(model))
        .tool(tool.clone())
        .store(Arc::clone(&store) as Arc<dyn SessionStore>)
        .build()
        .unwrap();
    let paused = agent.run_text("Transfer $500 to savings").await.unwrap();
    let paused_snap = agent
        .snapshot(paused.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    let directive = tool
        .interrupted(&paused.interrupts()[0])
        .unwrap()
        .restart(Some(Approval { approved: true }))
        .unwrap();
    let failed = agent
        .run(resume(vec![directive]), AgentInit::session(paused.session_id.clone()))
        .await
        .failed();
    assert_eq!(failed.finish_reason, FinishReason::Failed);
    assert!(failed.error.as_ref().unwrap().message.contains("the bank is down"));
    let failed_snap = failed_child(&agent, &failed, &paused).await;
    assert_eq!(
        failed_snap.state.unwrap().messages,
        paused_snap.state.unwrap().messages,
        "the failed snapshot keeps the paused conversation whole"
    );
}

#[tokio::test]
async fn pending_listing_and_audit_trail_follow_the_decisions() {
    use holdpoint::session::{AuditDecision, AuditQuery, SnapshotQuery};
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let pending = b.agent.decisions().pending(SnapshotQuery::default()).await.unwrap();
    assert_eq!(pending.len(), 1);
    let p = &pending[0];
    assert_eq!(p.tool, "transferMoney");
    assert_eq!(p.session_id, paused.session_id);
    assert_eq!(p.snapshot_id, paused.snapshot_id.clone().unwrap());
    assert_eq!(p.interrupt["details"], json!("Transfer $500.00 to savings"));
    assert_eq!(p.input["amount"], json!(500));
    assert!(!p.expired);
    // filters
    let other = SnapshotQuery {
        session_id: Some("someone-else".into()),
        ..Default::default()
    };
    assert!(b.agent.decisions().pending(other).await.unwrap().is_empty());

    let done = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert!(
        b.agent
            .decisions()
            .pending(SnapshotQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "answered calls leave the listing"
    );
    let audit = b.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1);
    // `Approval { approved, reason }` means yes or no: an approval.
    assert_eq!(audit[0].decision, AuditDecision::Approve);
    assert_eq!(audit[0].tool, "transferMoney");
    assert_eq!(audit[0].snapshot_id, paused.snapshot_id.unwrap());
    assert_eq!(
        audit[0].input_hash,
        holdpoint::session::hash_json(&json!({"amount": 500, "toAccount": "savings"}))
    );
}

#[tokio::test]
async fn a_restart_whose_numbers_were_re_encoded_is_not_a_modified_input() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let mut directive = approve(&b.tool, &paused);
    // a browser or Genkit JS client sends 500 back as 500.0
    directive.as_tool_request_mut().unwrap().input = Some(json!({"toAccount": "savings", "amount": 500.0}));
    let done = b
        .agent
        .run(resume(vec![directive]), AgentInit::session(paused.session_id))
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_audit_records_the_actor_beside_the_principal() {
    use holdpoint::session::AuditQuery;
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let mut ctx = serde_json::Map::new();
    ctx.insert(holdpoint::agent::ACTOR.into(), json!("carol@bank"));
    b.agent
        .run_with(
            resume(vec![approve(&b.tool, &paused)]),
            RunOptions::new(AgentInit::session(paused.session_id)).context(ctx),
        )
        .await
        .unwrap();
    let audit = b.agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].actor.as_deref(), Some("carol@bank"));
}

#[tokio::test]
async fn duplicate_refs_from_the_model_are_made_unique() {
    use holdpoint::{GenerateResponse, Message, Role};
    let b = bank();
    let twice = Message::new(
        Role::Model,
        vec![
            Part::tool_request(
                "transferMoney",
                Some("r".into()),
                Some(json!({"amount": 1, "toAccount": "a"})),
            ),
            Part::tool_request(
                "transferMoney",
                Some("r".into()),
                Some(json!({"amount": 2, "toAccount": "b"})),
            ),
        ],
    );
    b.model
        .reset([ScriptedTurn::response(GenerateResponse::from_message(twice))]);
    let paused = b.agent.run_text("two transfers").await.unwrap();
    let refs: Vec<String> = paused
        .interrupts()
        .iter()
        .map(|p| p.as_tool_request().unwrap().reference.clone().unwrap())
        .collect();
    assert_eq!(refs.len(), 2);
    assert_ne!(refs[0], refs[1], "each call can be answered on its own");
    assert_eq!(refs[0], "r", "the first keeps the model's ref");
}

#[tokio::test]
async fn a_restart_equal_by_value_runs_with_the_stored_original_input() {
    // A JavaScript client reads `500.0` as 500 and sends back `500`: the
    // restart is the same call, and the tool sees the paused input exactly.
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&seen);
    let tool = holdpoint::ResumableTool::<serde_json::Value, serde_json::Value, crate::Approval>::define(
        "transferMoney",
        "Transfers money",
        move |ctx: holdpoint::ToolContext, input: serde_json::Value, approval: Option<crate::Approval>| {
            let log = Arc::clone(&log);
            async move {
                match approval {
                    None => Err(ctx.interrupt(json!({"details": "Transfer $500.00"}))),
                    Some(_) => {
                        log.lock().unwrap().push(input.to_string());
                        Ok(json!("txn-1"))
                    }
                }
            }
        },
    )
    .unwrap();
    let model = holdpoint::ScriptedModel::new("scripted");
    model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500.0})));
    model.push(ScriptedTurn::text("Done"));
    let store = Arc::new(holdpoint::session::InMemoryStore::new());
    let agent = Agent::builder("bank")
        .model(Arc::new(model))
        .tool(tool.clone())
        .store(Arc::clone(&store) as Arc<dyn SessionStore>)
        .build()
        .unwrap();
    let paused = agent.run_text("Transfer $500").await.unwrap();
    let mut directive = tool
        .interrupted(&paused.interrupts()[0])
        .unwrap()
        .restart(Some(crate::Approval { approved: true }))
        .unwrap();
    if let Some(r) = directive.as_tool_request_mut() {
        r.input = Some(json!({"amount": 500}));
    }
    let done = agent
        .run(resume(vec![directive]), AgentInit::session(paused.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(done.text(), "Done");
    assert_eq!(*seen.lock().unwrap(), vec![r#"{"amount":500.0}"#.to_owned()]);
    let records = agent
        .decisions()
        .audit(holdpoint::session::AuditQuery::default())
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].input_hash,
        holdpoint::session::hash_json(&json!({"amount": 500.0}))
    );
    assert!(done.held_for.is_some(), "a resume reports how long its hold waited");
}
