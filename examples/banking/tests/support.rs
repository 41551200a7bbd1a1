//! `supportAgent` over HTTP and the operator CLI: a transfer asked of the
//! front desk pauses at `bankingAgent`'s approval, is listed on the front
//! desk with its details, and approving or denying that entry finishes
//! both turns.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::Served;

use serde_json::{Value, json};

fn serve() -> Served {
    common::serve(&["--store", "memory:"])
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Value {
    http.post(url).json(&body).send().await.unwrap().json().await.unwrap()
}

async fn get(http: &reqwest::Client, url: &str) -> Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

/// Asks the front desk for the transfer; the pending entry it lists.
async fn held_transfer(s: &Served, http: &reqwest::Client) -> (String, Value) {
    let support = format!("{}/agents/supportAgent", s.base);
    let message = json!({"role": "user", "content": [{"text": "Transfer $500 to my savings account."}]});
    let turn = post(http, &support, json!({"data": {"message": message}})).await;
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let pending = get(http, &format!("{support}/pending")).await;
    let items = pending["result"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{pending}");
    let item = items[0].clone();
    assert_eq!(item["tool"], "transferMoney", "{item}");
    assert_eq!(item["agent"], "supportAgent", "{item}");
    assert_eq!(item["input"]["amount"], 500.0, "{item}");
    assert!(
        item["interrupt"].to_string().contains("Transfer $500.00 to savings"),
        "{item}"
    );
    assert_eq!(item["path"][0]["agent"], "bankingAgent", "{item}");
    // The CLI lists it too.
    holdpoint_cli::run_from(
        ["holdpoint", "--server", &s.base, "pending", "--agent", "supportAgent"],
        vec![],
    )
    .await
    .unwrap();
    (support, item)
}

async fn latest_text(http: &reqwest::Client, s: &Served, agent: &str, session: &Value) -> (String, String) {
    let snap = post(
        http,
        &format!("{}/agents/{agent}/getSnapshot", s.base),
        json!({"data": {"sessionId": session}}),
    )
    .await;
    let messages = snap["result"]["state"]["messages"].as_array().unwrap().clone();
    let last = messages.last().unwrap();
    (
        snap["result"]["finishReason"].as_str().unwrap_or_default().to_owned(),
        last["content"].to_string(),
    )
}

#[tokio::test]
async fn approving_the_surfaced_transfer_finishes_both_turns() {
    let s = serve();
    let http = reqwest::Client::new();
    let (_support, item) = held_transfer(&s, &http).await;
    let snapshot = item["snapshotId"].as_str().unwrap();
    let reference = item["ref"].as_str().unwrap();
    holdpoint_cli::run_from(
        ["holdpoint", "--server", &s.base, "approve", snapshot, reference],
        vec![],
    )
    .await
    .unwrap();
    let (finish, text) = latest_text(&http, &s, "supportAgent", &item["sessionId"]).await;
    assert_eq!(finish, "stop");
    assert!(text.contains("Done: txn-"), "{text}");
    let (finish, text) = latest_text(&http, &s, "bankingAgent", &item["path"][0]["sessionId"]).await;
    assert_eq!(finish, "stop");
    assert!(text.contains("Done: txn-"), "{text}");
}

#[tokio::test]
async fn denying_the_surfaced_transfer_finishes_both_turns_without_a_transfer() {
    let s = serve();
    let http = reqwest::Client::new();
    let (_support, item) = held_transfer(&s, &http).await;
    let snapshot = item["snapshotId"].as_str().unwrap();
    let reference = item["ref"].as_str().unwrap();
    holdpoint_cli::run_from(
        [
            "holdpoint",
            "--server",
            &s.base,
            "deny",
            snapshot,
            reference,
            "--reason",
            "not today",
        ],
        vec![],
    )
    .await
    .unwrap();
    let (finish, text) = latest_text(&http, &s, "supportAgent", &item["sessionId"]).await;
    assert_eq!(finish, "stop");
    assert!(text.contains("not made"), "{text}");
    assert!(!text.contains("txn-"), "{text}");
    let (finish, _) = latest_text(&http, &s, "bankingAgent", &item["path"][0]["sessionId"]).await;
    assert_eq!(finish, "stop");
}
