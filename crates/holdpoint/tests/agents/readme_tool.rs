//! The README's own tool (`Approval { approved: bool }`, no
//! `ApprovalReply`) answered with approve and deny through `Decisions::answer`:
//! a resume type with one `bool` field means yes or no with no ceremony
//! (issue 33, item 1), and one that cannot says what to add.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, Answer, Answered};
use holdpoint::approval::ReplyShape;
use holdpoint::session::InMemoryStore;
use holdpoint::tool::{ResumableTool, ToolContext};
use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Transfer {
    amount: f64,
    to_account: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Approval {
    approved: bool,
}

/// The README's tool, word for word but for the counter.
fn transfer(moved: &Arc<AtomicUsize>) -> ResumableTool<Transfer, String, Approval> {
    let moved = Arc::clone(moved);
    ResumableTool::<Transfer, String, Approval>::define(
        "transferMoney",
        "Transfers money; needs approval",
        move |ctx: ToolContext, t: Transfer, approval: Option<Approval>| {
            let moved = Arc::clone(&moved);
            async move {
                match approval {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                    }
                    Some(a) if a.approved => {
                        moved.fetch_add(1, Ordering::SeqCst);
                        Ok("txn-123".to_string())
                    }
                    Some(_) => Err(ctx.fail("declined by the account holder")),
                }
            }
        },
    )
    .unwrap()
}

fn agent(tool: ResumableTool<Transfer, String, Approval>) -> Agent {
    let model = ScriptedModel::from_fn("scripted", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            let said = serde_json::to_string(&last.content).ok()?;
            return Some(ScriptedTurn::text(if said.contains("txn-123") {
                "Done: txn-123"
            } else {
                "Not done"
            }));
        }
        Some(ScriptedTurn::tool_call(
            "transferMoney",
            json!({"amount": 500, "toAccount": "savings"}),
        ))
    });
    Agent::builder("bankingAgent")
        .model(Arc::new(model))
        .tool(tool)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

fn resumed(answered: Answered) -> holdpoint::agent::AgentOutput {
    match answered {
        Answered::Resumed(out) => *out,
        other => panic!("not resumed: {other:?}"),
    }
}

#[tokio::test]
async fn readme_tool_is_approved_and_denied_through_answer() {
    let moved = Arc::new(AtomicUsize::new(0));
    let tool = transfer(&moved);
    let agent = agent(tool.clone());

    // The pause carries the inferred shape: approve and deny set `approved`.
    let paused = agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let shape = ReplyShape::on(&paused.interrupts()[0]).expect("an inferred approval reply");
    assert_eq!(shape.approve, json!({"approved": true}).as_object().unwrap().clone());
    assert_eq!(shape.deny, json!({"approved": false}).as_object().unwrap().clone());
    assert_eq!(shape.reason, None);

    let done = resumed(
        agent
            .decisions()
            .answer(Answer::approve(paused.snapshot_id.clone().unwrap()), Map::new())
            .await
            .unwrap(),
    );
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(done.text(), "Done: txn-123");
    assert_eq!(moved.load(Ordering::SeqCst), 1);

    // A denial (its reason has no field to go to) does not run the tool.
    let paused = agent.run_text("Transfer $500 to savings").await.unwrap();
    let denied = resumed(
        agent
            .decisions()
            .answer(
                Answer::deny(paused.snapshot_id.clone().unwrap(), Some("not today")),
                Map::new(),
            )
            .await
            .unwrap(),
    );
    assert_eq!(denied.text(), "Not done");
    assert_eq!(moved.load(Ordering::SeqCst), 1);
}

/// A reason lands in the resume type's one optional string field.
#[derive(Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
struct WithNote {
    #[serde(default)]
    ok: bool,
    note: Option<String>,
}

/// Two bools, or a bool beside a field the type cannot do without: no
/// guess.
#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct TwoFlags {
    approved: bool,
    urgent: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct NeedsMore {
    approved: bool,
    limit: u64,
}

#[test]
fn inferred_shapes_and_refusals() {
    let noop = |ctx: ToolContext, _t: Transfer, _r: Option<WithNote>| async move {
        Err::<String, _>(ctx.interrupt(json!({})))
    };
    let with_note = ResumableTool::<Transfer, String, WithNote>::define("a", "a", noop).unwrap();
    let shape = holdpoint::Tool::approval_reply(&with_note).expect("inferred").clone();
    assert_eq!(shape.reason.as_deref(), Some("note"));
    assert_eq!(
        shape.answer(false, Some("too much")),
        json!({"ok": false, "note": "too much"}).as_object().unwrap().clone()
    );
    assert_eq!(shape.read(&shape.answer(true, None)), Some((true, None)));

    let two = ResumableTool::<Transfer, String, TwoFlags>::define(
        "b",
        "b",
        |ctx: ToolContext, _t: Transfer, _r| async move { Err::<String, _>(ctx.interrupt(json!({}))) },
    )
    .unwrap();
    assert!(holdpoint::Tool::approval_reply(&two).is_none());
    let more = ResumableTool::<Transfer, String, NeedsMore>::define(
        "c",
        "c",
        |ctx: ToolContext, _t: Transfer, _r| async move { Err::<String, _>(ctx.interrupt(json!({}))) },
    )
    .unwrap();
    assert!(holdpoint::Tool::approval_reply(&more).is_none());
}
