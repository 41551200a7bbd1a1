//! Exactly-once resume through the public agent API (docs/reference.md §7), for any
//! pair of store handles on one database.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput};
use holdpoint::session::SessionStore;
use holdpoint::{FinishReason, ResumableTool, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::{Map, Value, json};

use crate::store_suite::RACERS;

type Transfer = ResumableTool<Value, Value, Map<String, Value>>;

/// A transfer tool that pauses until approved and counts its real runs.
fn transfer_tool(runs: Arc<AtomicUsize>) -> Transfer {
    ResumableTool::define(
        "transferMoney",
        "Moves money once approved",
        move |ctx, input: Value, approval: Option<Map<String, Value>>| {
            let runs = Arc::clone(&runs);
            async move {
                let approved = approval
                    .as_ref()
                    .and_then(|a| a.get("approved"))
                    .and_then(Value::as_bool);
                match approved {
                    None => Err(ctx.interrupt(json!({"details": format!("transfer {input}")}))),
                    Some(true) => {
                        runs.fetch_add(1, Ordering::SeqCst);
                        // Slow enough that the other resumes arrive while it runs.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(json!({"success": true, "transactionId": "txn-1"}))
                    }
                    Some(false) => Err(ctx.fail("declined")),
                }
            }
        },
    )
    .expect("define transferMoney")
}

/// One agent definition over `store`, sharing `model` and `tool`.
fn bank(store: Arc<dyn SessionStore>, model: &ScriptedModel, tool: &Transfer) -> Agent {
    Agent::builder("bank")
        .model(Arc::new(model.clone()))
        .tool(tool.clone())
        .store(store)
        .build()
        .expect("build agent")
}

/// A turn pauses at an approval through handle `a`; then [`RACERS`]
/// resumes approving it run at once, alternating between an agent on `a`
/// and one on `b` (two replicas). Exactly one resume succeeds, the approved
/// tool runs exactly once, and every other resume fails with `ABORTED`
/// "already resumed".
pub async fn exactly_once_resume(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = transfer_tool(Arc::clone(&runs));
    let model = ScriptedModel::new("scripted");
    model.push(ScriptedTurn::tool_call(
        "transferMoney",
        json!({"amount": 500, "toAccount": "savings"}),
    ));
    for _ in 0..RACERS {
        model.push(ScriptedTurn::text("Done: txn-1"));
    }
    let agents = [bank(a, &model, &tool), bank(b, &model, &tool)];

    let paused = agents[0]
        .run_text("Transfer $500 to savings")
        .await
        .expect("first turn");
    assert_eq!(paused.finish_reason, FinishReason::Interrupted, "{paused:?}");
    let snapshot = paused.snapshot_id.clone().expect("an interrupted turn has a snapshot");
    let interrupts = paused.interrupts();
    assert_eq!(interrupts.len(), 1, "{paused:?}");
    let mut yes = Map::new();
    yes.insert("approved".into(), Value::Bool(true));
    let approve = tool
        .interrupted(&interrupts[0])
        .expect("the pause is transferMoney's")
        .restart(Some(yes))
        .expect("restart part");

    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let agent = agents[i % 2].clone();
        let input = AgentInput::resume(Resume::from_parts([approve.clone()]));
        let init = AgentInit::snapshot(snapshot.clone());
        tasks.push(tokio::spawn(async move { agent.run(input, init).await }));
    }
    let (mut done, mut aborted) = (0, 0);
    for task in tasks {
        let out = task
            .await
            .expect("resume task panicked")
            .or_else(holdpoint::Error::into_failed_output)
            .expect("run returned an error");
        match (&out.finish_reason, &out.error) {
            (FinishReason::Stop, None) => {
                assert_eq!(out.text(), "Done: txn-1");
                done += 1;
            }
            (FinishReason::Failed, Some(err)) if err.status == Status::Aborted => {
                assert_eq!(out.failure, Some(holdpoint::agent::FailureReason::AlreadyResumed));
                assert!(err.message.contains("already resumed"), "{}", err.message);
                aborted += 1;
            }
            _ => panic!("unexpected resume outcome: {out:?}"),
        }
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the approved tool must run exactly once"
    );
    assert_eq!(
        (done, aborted),
        (1, RACERS - 1),
        "{done} resumes succeeded, {aborted} aborted"
    );
    let claimed = agents[1]
        .snapshot(&snapshot, Access::Full)
        .await
        .expect("read")
        .expect("present");
    assert!(claimed.resumed_at.is_some(), "the paused snapshot should be claimed");
}
