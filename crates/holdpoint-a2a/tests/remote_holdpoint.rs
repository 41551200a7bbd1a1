//! `A2aAgentTool` against a real A2A server — Holdpoint's own, over
//! loopback — hosting a banking agent whose transfers are held by
//! ToolApproval. The root agent keeps its sessions in a SQLite file and is
//! dropped and rebuilt between the hold and the answer: the remote's
//! `input-required` surfaces as the root's hold, and the answer (or the
//! denial) reaches the remote task after the "restart".

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentInit, AgentInput};
use holdpoint::message::{PartKind, Role};
use holdpoint::middleware::ToolApproval;
use holdpoint::model::FinishReason;
use holdpoint::session::InMemoryStore;
use holdpoint::tool::tool;
use holdpoint::{Resume, ScriptedModel, ScriptedTurn, ToolContext};
use holdpoint_a2a::A2aAgentTool;
use holdpoint_store_sqlite::SqliteStore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Transfer {
    amount: u32,
}

/// The text of the tool responses of the last message, or the last text.
fn model(name: &str, on_text: impl Fn(&str) -> ScriptedTurn + Send + Sync + 'static) -> ScriptedModel {
    ScriptedModel::from_fn(name.to_owned(), move |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let said = last
                .content
                .iter()
                .filter_map(|p| match &p.kind {
                    PartKind::ToolResponse(r) => Some(r.output.clone().unwrap_or(Value::Null).to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            return Some(ScriptedTurn::text(format!("result: {said}")));
        }
        Some(on_text(&last.text()))
    })
}

struct Remote {
    url: String,
    transfers: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Holdpoint's server with a banking agent whose `transferMoney` waits
/// for approval.
async fn remote() -> Remote {
    let transfers = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&transfers);
    let transfer = tool("transferMoney", "Moves money", move |_ctx: ToolContext, t: Transfer| {
        let counter = Arc::clone(&counter);
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"transferred": t.amount}))
        }
    });
    let bank = Agent::builder("bankingAgent")
        .description("Moves money after a person approves")
        .model(Arc::new(model("scripted/bank", |_| {
            ScriptedTurn::tool_call("transferMoney", json!({"amount": 500}))
        })))
        .tool(transfer)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let server = holdpoint_server::Server::builder().agent(bank).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        holdpoint_server::serve(listener, &server, async move {
            let _ = stopped.await;
        })
        .await
    });
    Remote {
        url: format!("http://{addr}/agents/bankingAgent/a2a"),
        transfers,
        _stop: stop,
    }
}

/// The root agent, its sessions in the SQLite file at `path`.
async fn root(path: &std::path::Path, url: &str) -> Agent {
    let store = SqliteStore::open(path).await.unwrap();
    let bank = A2aAgentTool::new("bank", "The bank's agent", url).unwrap();
    Agent::builder("root")
        .model(Arc::new(model("scripted/root", |text| {
            ScriptedTurn::tool_call("bank", json!({"input": text}))
        })))
        .tool(bank)
        .store(Arc::new(store))
        .build()
        .unwrap()
}

async fn get_task(url: &str, id: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
    let r: Value = reqwest::Client::new()
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["result"].clone()
}

/// Runs the root to the remote's hold; returns the held snapshot and the
/// surfaced part.
async fn held(path: &std::path::Path, remote: &Remote) -> (String, holdpoint::Part) {
    let before = remote.transfers.load(Ordering::SeqCst);
    let agent = root(path, &remote.url).await;
    let out = agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    let parts = out.interrupts();
    assert_eq!(parts.len(), 1, "{out:?}");
    let data = parts[0].interrupt_data().unwrap();
    assert_eq!(data["kind"], "a2a.inputRequired");
    assert_eq!(data["agentUrl"], json!(remote.url));
    let task_id = data["taskId"].as_str().unwrap();
    assert!(!data["contextId"].as_str().unwrap().is_empty());
    let question = data["question"]["data"].as_array().unwrap();
    assert_eq!(question.len(), 1, "{data:?}");
    assert_eq!(question[0]["kind"], "holdpoint.hold");
    assert_eq!(question[0]["tool"], "transferMoney");
    let task = get_task(&remote.url, task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task:#}");
    assert_eq!(remote.transfers.load(Ordering::SeqCst), before, "held, not run");
    (out.snapshot_id.clone().unwrap(), parts[0].clone())
}

#[tokio::test]
async fn approving_after_a_restart_runs_the_remote_transfer_once() {
    let remote = remote().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");
    let (snapshot, part) = held(&path, &remote).await;
    let task_id = part.interrupt_data().unwrap()["taskId"].as_str().unwrap().to_owned();

    // A new process: a new agent on the same file.
    let agent = root(&path, &remote.url).await;
    let resume = Resume::from_parts([part.restart(Some(json!({"approved": true}))).unwrap()]);
    let out = agent
        .run(
            AgentInput::resume(resume.clone()),
            AgentInit::snapshot(snapshot.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(out.text().contains("transferred"), "{}", out.text());
    assert_eq!(remote.transfers.load(Ordering::SeqCst), 1);
    let task = get_task(&remote.url, &task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");

    // The same answer again changes nothing.
    let again = agent
        .run(AgentInput::resume(resume), AgentInit::snapshot(snapshot))
        .await;
    assert!(again.is_err() || again.unwrap().is_failed());
    assert_eq!(remote.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn denying_cancels_the_remote_task() {
    let remote = remote().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");
    let (snapshot, part) = held(&path, &remote).await;
    let task_id = part.interrupt_data().unwrap()["taskId"].as_str().unwrap().to_owned();

    let agent = root(&path, &remote.url).await;
    let resume = Resume::from_parts([part
        .restart(Some(json!({"approved": false, "reason": "not today"})))
        .unwrap()]);
    let out = agent
        .run(AgentInput::resume(resume), AgentInit::snapshot(snapshot))
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(out.text().contains("not today"), "{}", out.text());
    assert!(out.text().contains("canceled"), "{}", out.text());
    assert_eq!(remote.transfers.load(Ordering::SeqCst), 0);
    let task = get_task(&remote.url, &task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task:#}");
}

/// An approver's answer (`Decisions::answer`, what the inbox and `holdpoint
/// approve` send) answers the remote task through the tool's approval
/// reply, and a denial's reason reaches the model.
#[tokio::test]
async fn an_approvers_answer_reaches_the_remote_task() {
    use holdpoint::agent::{Answer, Answered, Caller};
    let remote = remote().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");

    let (snapshot, _) = held(&path, &remote).await;
    let agent = root(&path, &remote.url).await;
    let answered = agent
        .decisions()
        .answer(Answer::approve(snapshot), Caller::anonymous())
        .await
        .unwrap();
    let Answered::Resumed(out) = answered else {
        panic!("not resumed: {answered:?}")
    };
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(out.text().contains("transferred"), "{}", out.text());
    assert_eq!(remote.transfers.load(Ordering::SeqCst), 1);

    let (snapshot, part) = held(&path, &remote).await;
    let task_id = part.interrupt_data().unwrap()["taskId"].as_str().unwrap().to_owned();
    let agent = root(&path, &remote.url).await;
    let answered = agent
        .decisions()
        .answer(Answer::deny(snapshot, Some("over the limit")), Caller::anonymous())
        .await
        .unwrap();
    let Answered::Resumed(out) = answered else {
        panic!("not resumed: {answered:?}")
    };
    assert!(out.text().contains("over the limit"), "{}", out.text());
    assert_eq!(
        remote.transfers.load(Ordering::SeqCst),
        1,
        "the denied transfer never ran"
    );
    let task = get_task(&remote.url, &task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task:#}");
}
