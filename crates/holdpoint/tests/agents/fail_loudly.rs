//! A failed turn is an `Err` carrying the failed output: `?` never passes
//! one on as a success.

use std::sync::Arc;

use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentOutput, FailureReason};
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::{Error, Part, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::json;

use crate::{Approval, Bank, approve, bank};

fn resume(parts: Vec<Part>) -> AgentInput {
    AgentInput::resume(Resume::from_parts(parts))
}

/// The failed output of `err`, checked against the error itself; it names
/// the snapshot `from` the failed turn started from (a turn that keeps a
/// seam names its own failed snapshot instead: see [`failed_output_of`]).
fn failed_output(err: &Error, from: Option<&str>) -> AgentOutput {
    let Error::TurnFailed(out) = err else {
        panic!("expected TurnFailed, got {err:?}");
    };
    let body = out.error.clone().expect("a failed output names its error");
    assert_eq!(err.status(), body.status);
    assert_eq!(err.to_string(), body.message);
    assert_eq!(out.snapshot_id.as_deref(), from);
    (**out).clone()
}

#[tokio::test]
async fn a_hard_tool_error_is_an_err_with_the_failed_output() {
    let tool = holdpoint::ResumableTool::<serde_json::Value, serde_json::Value, Approval>::define(
        "transferMoney",
        "Transfers money",
        |_ctx: holdpoint::ToolContext, _input: serde_json::Value, _approval: Option<Approval>| async move {
            Err::<serde_json::Value, _>(holdpoint::ToolError::Error("the bank is down".into()))
        },
    )
    .unwrap();
    let model = ScriptedModel::new("scripted");
    model.push(ScriptedTurn::text("Hello"));
    model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500})));
    let agent = Agent::builder("bank")
        .model(Arc::new(model))
        .tool(tool)
        .store(Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>)
        .build()
        .unwrap();
    let hello = agent.run_text("Hi").await.unwrap();
    let err = agent
        .run(
            AgentInput::text("Transfer $500"),
            AgentInit::session(hello.session_id.clone()),
        )
        .await
        .unwrap_err();
    let out = failed_output_of(&err);
    assert_eq!(out.failure, Some(FailureReason::ToolFailed));
    assert_eq!(err.status(), Status::Internal);
    assert!(err.to_string().contains("the bank is down"), "{err}");
    // The hard tool failure dropped the round it opened: the failed
    // snapshot, a child of the last good one, ends at the user message.
    let failed = agent
        .snapshot(out.snapshot_id.as_deref().unwrap(), Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.parent_id, hello.snapshot_id);
    let messages = failed.state.unwrap().messages;
    assert_eq!(messages.last().unwrap().text(), "Transfer $500");
}

/// [`failed_output`] of a turn that wrote a failed snapshot of its own.
fn failed_output_of(err: &Error) -> AgentOutput {
    let Error::TurnFailed(out) = err else {
        panic!("expected TurnFailed, got {err:?}");
    };
    assert!(out.snapshot_id.is_some(), "the failed snapshot is named");
    (**out).clone()
}

#[tokio::test]
async fn a_rejected_resume_is_an_err_with_the_failed_output() {
    let b = bank();
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let mut forged = approve(&b.tool, &paused);
    if let Some(r) = forged.as_tool_request_mut() {
        r.input = Some(json!({"amount": 5000, "toAccount": "savings"}));
    }
    let err = b
        .agent
        .run(
            resume(vec![forged]),
            AgentInit::snapshot(paused.snapshot_id.clone().unwrap()),
        )
        .await
        .unwrap_err();
    let out = failed_output(&err, paused.snapshot_id.as_deref());
    assert_eq!(out.failure, Some(FailureReason::InvalidResume));
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("modified inputs"), "{err}");
    assert_eq!(b.runs.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_already_resumed_replay_is_an_err_with_the_failed_output() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    let snap = paused.snapshot_id.clone().unwrap();
    let done = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::snapshot(snap.clone()),
        )
        .await
        .unwrap();
    let err = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::snapshot(snap.clone()),
        )
        .await
        .unwrap_err();
    let out = failed_output(&err, Some(&snap));
    let latest = b
        .agent
        .latest_snapshot(&out.session_id, Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(latest.snapshot_id), done.snapshot_id, "the replay wrote nothing");
    assert_eq!(out.failure, Some(FailureReason::AlreadyResumed));
    assert!(out.failure.unwrap().is_conflict());
    assert_eq!(err.status(), Status::Aborted);
    assert!(err.to_string().contains("already resumed"), "{err}");
    assert_eq!(b.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// The README's pattern: run, approve the paused call, read the reply.
async fn readme_flow(b: &Bank) -> holdpoint::Result<String> {
    let paused = b.agent.run_text("Transfer $500 to savings").await?;
    let done = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::session(paused.session_id.clone()),
        )
        .await?;
    Ok(done.text())
}

#[tokio::test]
async fn the_readme_pattern_with_question_mark_fails_on_a_failed_turn() {
    let ok = bank();
    ok.model.push(ScriptedTurn::text("Done"));
    assert_eq!(readme_flow(&ok).await.unwrap(), "Done");
    // No model reply is queued after the transfer: the resumed turn fails,
    // and `?` hands the failure to the caller instead of an empty reply.
    let failing = bank();
    let err = readme_flow(&failing).await.unwrap_err();
    let out = err.failed_output().expect("the failed output rides along");
    assert_eq!(out.failure, Some(FailureReason::Other));
    assert!(out.snapshot_id.is_some());
}

#[tokio::test]
async fn a_connection_that_answers_its_holds_reports_their_age() {
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.held_for, None, "a turn that answered nothing");
    let conn = b
        .agent
        .connect(AgentInit::session(paused.session_id.clone()))
        .await
        .unwrap();
    conn.send(resume(vec![approve(&b.tool, &paused)])).unwrap();
    let done = conn.output().await.unwrap();
    assert_eq!(done.text(), "Done");
    assert!(done.held_for.is_some(), "{done:?}");
}
