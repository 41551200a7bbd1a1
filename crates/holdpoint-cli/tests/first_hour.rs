//! The README's own tool answered by `holdpoint approve` / `deny` against a
//! live server (issue 33, item 1): its resume type `Approval { approved:
//! bool }` declares no `ApprovalReply`, and approve and deny still fit.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::sync::Arc;

use holdpoint::agent::Agent;
use holdpoint::session::InMemoryStore;
use holdpoint::{ResumableTool, ScriptedModel, ScriptedTurn, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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

fn readme_agent() -> Agent {
    let transfer = ResumableTool::<Transfer, String, Approval>::define(
        "transferMoney",
        "Transfers money; needs approval",
        |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
            match approval {
                None => {
                    Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                }
                Some(a) if a.approved => Ok("txn-123".to_string()),
                Some(_) => Err(ctx.fail("declined by the account holder")),
            }
        },
    )
    .unwrap();
    let model = ScriptedModel::from_fn("scripted", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            let said = serde_json::to_string(&last.content).ok()?;
            let done = said.contains("txn-123");
            return Some(ScriptedTurn::text(if done { "Done: txn-123" } else { "Not done" }));
        }
        Some(ScriptedTurn::tool_call(
            "transferMoney",
            json!({"amount": 500, "toAccount": "savings"}),
        ))
    });
    Agent::builder("bankingAgent")
        .model(Arc::new(model))
        .tool(transfer)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

fn holdpoint(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_API_KEY")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holdpoint_approve_and_deny_answer_the_readme_tool_through_a_server() {
    const KEY: &str = "k-operator-0123456789";
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(readme_agent())
        .api_keys(holdpoint_server::auth::ApiKeys::new().key(KEY, "ops"))
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let http = reqwest::Client::new();
    let pause = || async {
        let turn: Value = http
            .post(format!("{base}/agents/bankingAgent"))
            .header("X-API-Key", KEY)
            .json(&json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
        turn["result"]["snapshotId"].as_str().unwrap().to_owned()
    };

    let snapshot = pause().await;
    let (ok, out, err) = holdpoint(&["--server", &base, "--api-key", KEY, "approve", &snapshot]);
    assert!(ok, "{err}");
    assert!(out.contains("ended: stop") && out.contains("Done: txn-123"), "{out}");

    let snapshot = pause().await;
    let (ok, out, err) = holdpoint(&[
        "--server",
        &base,
        "--api-key",
        KEY,
        "deny",
        &snapshot,
        "--reason",
        "not today",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("Not done") && !out.contains("txn-123"), "{out}");
}
