//! The README's own tool over HTTP (issue 33, item 1): the bank fixture's
//! `transferMoney` has the README's `Approval { approved: bool }` with no
//! `ApprovalReply`, and `POST /agents/{name}/answer` approves and denies
//! it with no hand-written JSON.

use serde_json::{Value, json};

use crate::support::{fixture, user};

/// Pauses a transfer and returns the paused output.
async fn pause(f: &crate::support::Fixture) -> Value {
    let (code, out) = f
        .server
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{out:#}");
    assert_eq!(out["result"]["finishReason"], "interrupted", "{out:#}");
    out["result"].clone()
}

#[tokio::test]
async fn the_readme_tool_is_approved_and_denied_through_answer() {
    let f = fixture(false).await;

    let paused = pause(&f).await;
    // The listing offers the inferred yes/no.
    let (code, pending) = f.server.get("/agents/bankingAgent/pending", None).await;
    assert_eq!(code, 200, "{pending:#}");
    let call = &pending["result"][0];
    assert_eq!(
        call["part"]["metadata"]["approvalReply"],
        json!({"approve": {"approved": true}, "deny": {"approved": false}}),
        "{call:#}"
    );
    let (code, done) = f
        .server
        .post(
            "/agents/bankingAgent/answer",
            json!({"data": {"snapshotId": paused["snapshotId"], "decision": "approve"}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], json!(true), "{done:#}");
    let text = done.to_string();
    assert!(text.contains("Done: txn-123"), "{done:#}");

    let paused = pause(&f).await;
    let (code, denied) = f
        .server
        .post(
            "/agents/bankingAgent/answer",
            json!({"data": {"snapshotId": paused["snapshotId"], "decision": "deny", "reason": "not today"}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{denied:#}");
    let text = denied.to_string();
    assert!(text.contains("The transfer was not made"), "{denied:#}");
    assert!(!text.contains("txn-123"), "{denied:#}");

    // The audit says what each answer was.
    let (_, audit) = f.server.get("/agents/bankingAgent/audit", None).await;
    let mut decisions: Vec<&str> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["decision"].as_str())
        .collect();
    decisions.sort_unstable();
    assert_eq!(decisions, ["approve", "deny"], "{audit:#}");
}

/// A newer Genkit client's part or message with a field Holdpoint does not
/// know is served (the field dropped); a known field of the wrong type is
/// still 400 INVALID_ARGUMENT, and so is an init's unknown field.
#[tokio::test]
async fn unknown_wire_fields_are_ignored_over_http() {
    let f = fixture(false).await;
    let (code, out) = f
        .server
        .post(
            "/agents/bankingAgent",
            json!({"data": {
                "message": {"role": "user", "content": [{"text": "what is my balance", "newPartField": {"a": 1}}],
                            "newMessageField": 1}
            }}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{out:#}");
    assert_eq!(out["result"]["finishReason"], "stop", "{out:#}");
    assert!(!out.to_string().contains("newPartField"), "{out:#}");

    let (code, body) = f
        .server
        .post(
            "/agents/bankingAgent",
            json!({"data": {"message": {"role": "user", "content": [{"text": 5}]}}}),
            None,
        )
        .await;
    assert_eq!(code, 400, "{body:#}");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body:#}");
    let (code, body) = f
        .server
        .post(
            "/agents/bankingAgent",
            json!({"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"sesionId": "x"}}),
            None,
        )
        .await;
    assert_eq!(code, 400, "{body:#}");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body:#}");
}
