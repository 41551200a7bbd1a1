//! Signed client-held state over HTTP: round trips, tampering (403) and key
//! rotation through the data directory.

use holdpoint_server::Server;
use holdpoint_server::signing::{KEY_FILE, KeyRing};
use serde_json::{Value, json};

use crate::support::*;

fn client_server(keys: KeyRing) -> Server {
    Server::builder()
        .agent(bank_client_managed())
        .signing_keys(keys)
        .build()
        .unwrap()
}

async fn paused_state(s: &TestServer) -> (Value, Value) {
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    assert_eq!(out["finishReason"], "interrupted");
    assert!(out.get("snapshotId").is_none());
    (out["state"].clone(), paused_part(&out))
}

fn resume_with(state: &Value, part: &Value) -> Value {
    json!({"data": {"resume": {"restart": [restart(part, json!({"approved": true}))]}}, "init": {"state": state}})
}

#[tokio::test]
async fn state_is_signed_and_round_trips() {
    let s = TestServer::start(client_server(KeyRing::ephemeral().unwrap())).await;
    let (state, part) = paused_state(&s).await;
    let sig = &state["signature"];
    assert_eq!(sig["alg"], "HS256");
    assert!(sig["kid"].is_string() && sig["mac"].is_string(), "{state:#}");
    let (code, body) = s.post("/agents/bankingAgent", resume_with(&state, &part), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["message"]["content"][0]["text"], "Done: txn-123");
    assert!(body["result"]["state"]["signature"].is_object());
}

#[tokio::test]
async fn altered_unsigned_and_foreign_state_is_403() {
    let s = TestServer::start(client_server(KeyRing::ephemeral().unwrap())).await;
    let (state, part) = paused_state(&s).await;

    // Rewrite the paused transfer's amount in the history.
    let mut altered = state.clone();
    let text = serde_json::to_string(&altered["messages"])
        .unwrap()
        .replace("500", "50000");
    altered["messages"] = serde_json::from_str(&text).unwrap();
    let got = s.post("/agents/bankingAgent", resume_with(&altered, &part), None).await;
    assert_error(&got, 403, "PERMISSION_DENIED", "altered");

    let mut unsigned = state.clone();
    unsigned.as_object_mut().unwrap().remove("signature");
    let got = s
        .post("/agents/bankingAgent", resume_with(&unsigned, &part), None)
        .await;
    assert_error(&got, 403, "PERMISSION_DENIED", "unsigned");

    let other = TestServer::start(client_server(KeyRing::ephemeral().unwrap())).await;
    let got = other
        .post("/agents/bankingAgent", resume_with(&state, &part), None)
        .await;
    assert_error(&got, 403, "PERMISSION_DENIED", "unknown key");

    let mut relabelled = state.clone();
    relabelled["signature"]["kid"] = json!("made-up");
    let got = s
        .post("/agents/bankingAgent", resume_with(&relabelled, &part), None)
        .await;
    assert_error(&got, 403, "PERMISSION_DENIED", "unknown key");

    let got = s
        .post("/agents/bankingAgent", resume_with(&json!("a string"), &part), None)
        .await;
    assert_eq!(got.0, 400, "{:#}", got.1);

    // The genuine state still works: the refusals consumed nothing.
    let (code, body) = s.post("/agents/bankingAgent", resume_with(&state, &part), None).await;
    assert_eq!(code, 200, "{body:#}");
}

#[tokio::test]
async fn keys_live_in_the_data_dir_and_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let build = || {
        Server::builder()
            .agent(bank_client_managed())
            .data_dir(dir.path())
            .build()
            .unwrap()
    };
    let first = TestServer::start(build()).await;
    assert!(dir.path().join(KEY_FILE).exists());
    let (old_state, part) = paused_state(&first).await;
    let old_kid = old_state["signature"]["kid"].clone();

    // A restart keeps the key.
    let again = TestServer::start(build()).await;
    let (state, _) = paused_state(&again).await;
    assert_eq!(state["signature"]["kid"], old_kid);

    // Rotate: the new key signs, the old one still verifies.
    KeyRing::rotate_in(dir.path()).unwrap();
    let rotated = TestServer::start(build()).await;
    let (code, body) = rotated
        .post("/agents/bankingAgent", resume_with(&old_state, &part), None)
        .await;
    assert_eq!(code, 200, "{body:#}");
    let new_kid = body["result"]["state"]["signature"]["kid"].clone();
    assert_ne!(new_kid, old_kid);

    // Once the old key is retired, its state is refused.
    let retired = KeyRing::load_or_create(dir.path()).unwrap().retain_newest(1);
    let strict = TestServer::start(client_server(retired)).await;
    let got = strict
        .post("/agents/bankingAgent", resume_with(&old_state, &part), None)
        .await;
    assert_error(&got, 403, "PERMISSION_DENIED", "unknown key");
}

#[tokio::test]
async fn one_agents_state_does_not_load_into_another() {
    let s = TestServer::start(
        Server::builder()
            .agent(crate::support::bank_client_managed_named("clientBank"))
            .agent(crate::support::bank_client_managed_named("otherBank"))
            .signing_keys(KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let (code, body) = s.post("/agents/clientBank", json!({"data": user("hello")}), None).await;
    assert_eq!(code, 200, "{body:#}");
    let state = body["result"]["state"].clone();
    let again = json!({"data": user("again"), "init": {"state": state}});
    assert_eq!(s.post("/agents/clientBank", again.clone(), None).await.0, 200);
    let got = s.post("/agents/otherBank", again, None).await;
    assert_error(&got, 403, "PERMISSION_DENIED", "another agent");
}
