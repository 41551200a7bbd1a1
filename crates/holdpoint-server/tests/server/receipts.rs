//! Approval receipts over HTTP (docs/reference.md §20): the server
//! publishes the receipts' public keys, and a call approved through the
//! API runs with a receipt that verifies against the published JWKS for
//! that tool and input only.

use std::sync::{Arc, Mutex};

use holdpoint::agent::Agent;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::SessionStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_receipt::{Expect, Jwks, ReceiptSigner, verify};
use holdpoint_server::Server;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, memory};

/// A pay tool held by ToolApproval that keeps the receipt it ran with.
fn payer(store: Arc<dyn SessionStore>, signer: Arc<ReceiptSigner>, seen: Arc<Mutex<Vec<String>>>) -> Agent {
    let pay = DynamicTool::new(
        "payBill",
        "Pays a bill",
        json!({"type": "object"}),
        move |ctx: ToolContext, input: Value| {
            if let Some(r) = ctx.receipt() {
                seen.lock().unwrap().push(r.to_owned());
            }
            async move { Ok(json!({"paid": input["amount"]})) }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/payer", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("paid"));
        }
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": 42})))
    });
    Agent::builder("payer")
        .model(Arc::new(model))
        .tool(pay)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .receipts(signer)
        .store(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_approved_call_runs_with_a_receipt_the_published_keys_verify() {
    let signer = Arc::new(ReceiptSigner::ephemeral().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = TestServer::start(
        Server::builder()
            .agent(payer(memory(), Arc::clone(&signer), Arc::clone(&seen)))
            .receipt_keys(serde_json::to_value(signer.jwks()).unwrap())
            .build()
            .unwrap(),
    )
    .await;

    let (code, held) = server
        .post(
            "/agents/payer",
            json!({"data": {"message": {"role": "user", "content": [{"text": "pay it"}]}}}),
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{held:#}");
    assert_eq!(held["result"]["finishReason"], "interrupted", "{held:#}");
    let answer = json!({"data": {"snapshotId": held["result"]["snapshotId"], "decision": "approve"}});
    let (code, done) = server.post("/agents/payer/answer", answer, None).await;
    assert_eq!(code, StatusCode::OK, "{done:#}");
    let receipt = seen
        .lock()
        .unwrap()
        .pop()
        .expect("the approved call ran with a receipt");

    // The keys are public: no credentials needed.
    let (code, published) = server.get("/.well-known/holdpoint-receipts.json", None).await;
    assert_eq!(code, StatusCode::OK, "{published:#}");
    let jwks = Jwks::from_json(&published.to_string()).unwrap();
    let ok = verify(&receipt, &jwks, &Expect::new("payBill", &json!({"amount": 42}))).unwrap();
    assert_eq!(ok.subject.tool, "payBill");
    // Never for another input or tool.
    assert!(verify(&receipt, &jwks, &Expect::new("payBill", &json!({"amount": 43}))).is_err());
    assert!(verify(&receipt, &jwks, &Expect::new("closeAccount", &json!({"amount": 42}))).is_err());
}

#[tokio::test]
async fn a_server_without_receipt_keys_says_so() {
    let signer = Arc::new(ReceiptSigner::ephemeral().unwrap());
    let server = TestServer::start(
        Server::builder()
            .agent(payer(memory(), signer, Arc::default()))
            .build()
            .unwrap(),
    )
    .await;
    let (code, body) = server.get("/.well-known/holdpoint-receipts.json", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body:#}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("receipt_keys"),
        "{body:#}"
    );
}
