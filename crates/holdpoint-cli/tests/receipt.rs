//! `holdpoint receipt verify` in a separate process (docs/reference.md
//! §20.4): it accepts the receipt a real approved call carried, and
//! refuses it for an edited input, another tool, after a forged claim, or
//! against another issuer's keys.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, RunOptions};
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::receipt::ReceiptSigner;
use holdpoint::session::InMemoryStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn};
use serde_json::{Map, Value, json};

/// The receipt a `transferMoney` call got once `olga` approved it.
async fn real_receipt(signer: Arc<ReceiptSigner>, input: &Value) -> (String, String) {
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let keep = Arc::clone(&seen);
    let tool = DynamicTool::new(
        "transferMoney",
        "moves money",
        json!({"type": "object"}),
        move |ctx: ToolContext, _input: Value| {
            let keep = Arc::clone(&keep);
            async move {
                *keep.lock().unwrap() = ctx.receipt().map(str::to_owned);
                Ok(json!({"ok": true}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::new("scripted/receipt-cli");
    model.push(ScriptedTurn::tool_call("transferMoney", input.clone()));
    model.push(ScriptedTurn::text("done"));
    let policy = Policy::new([RuleSpec {
        name: Some("transfers".into()),
        tool: Some("transferMoney".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        ..RuleSpec::default()
    }])
    .unwrap();
    let agent = Agent::builder("bank")
        .model(Arc::new(model))
        .tools([tool])
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .receipts(signer)
        .build()
        .unwrap();
    let out = agent
        .run_with(
            AgentInput::text("pay"),
            RunOptions::new(AgentInit::new()).principal("alice"),
        )
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Interrupted);
    let snapshot = out.snapshot_id.clone().unwrap();
    let reference = out.interrupts()[0]
        .as_tool_request()
        .unwrap()
        .reference
        .clone()
        .unwrap();
    let mut olga = Map::new();
    olga.insert("principal".into(), json!("olga"));
    olga.insert("roles".into(), json!(["finance"]));
    agent
        .decisions()
        .answer(Answer::approve(snapshot.clone()), olga)
        .await
        .unwrap();
    let token = seen.lock().unwrap().clone().expect("the approved call had a receipt");
    (token, format!("{snapshot}#{reference}"))
}

fn verify_cli(token: &str, jwks: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(["receipt", "verify", token, "--jwks"])
        .arg(jwks)
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test]
async fn the_standalone_verifier_accepts_the_real_receipt_and_refuses_forgeries() {
    let dir = tempfile::tempdir().unwrap();
    let signer = Arc::new(ReceiptSigner::load_or_create(dir.path()).unwrap());
    let input = json!({"amount": 18300, "toAccount": "acct-4471"});
    let (token, hold) = real_receipt(Arc::clone(&signer), &input).await;
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, serde_json::to_string(&signer.jwks()).unwrap()).unwrap();
    let input_text = input.to_string();

    let (ok, text) = verify_cli(
        &token,
        &jwks,
        &["--tool", "transferMoney", "--input", &input_text, "--hold", &hold],
    );
    assert!(ok, "{text}");
    assert!(text.contains("valid receipt: approve transferMoney"), "{text}");
    assert!(text.contains("olga [finance]"), "{text}");

    // The same input re-serialised by a client still verifies.
    let (ok, text) = verify_cli(
        &token,
        &jwks,
        &[
            "--tool",
            "transferMoney",
            "--input",
            r#"{"toAccount":"acct-4471","amount":18300.0}"#,
        ],
    );
    assert!(ok, "{text}");

    // Edited after approval.
    let edited = r#"{"amount": 99999, "toAccount": "acct-4471"}"#;
    let (ok, text) = verify_cli(&token, &jwks, &["--tool", "transferMoney", "--input", edited]);
    assert!(!ok && text.contains("another input"), "{text}");
    // Another tool, another hold.
    let (ok, text) = verify_cli(&token, &jwks, &["--tool", "closeAccount", "--input", &input_text]);
    assert!(!ok && text.contains("for tool"), "{text}");
    let (ok, text) = verify_cli(
        &token,
        &jwks,
        &["--tool", "transferMoney", "--input", &input_text, "--hold", "other#ref"],
    );
    assert!(!ok && text.contains("for hold"), "{text}");

    // A forged claim: the hash rewritten to the edited input's.
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["inputSha256"] = json!(holdpoint::receipt::input_sha256(&serde_json::from_str(edited).unwrap()));
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        parts[2]
    );
    let (ok, text) = verify_cli(&forged, &jwks, &["--tool", "transferMoney", "--input", edited]);
    assert!(!ok && text.contains("signature"), "{text}");

    // Another issuer's keys.
    let stranger = dir.path().join("stranger.json");
    std::fs::write(
        &stranger,
        serde_json::to_string(&ReceiptSigner::ephemeral().unwrap().jwks()).unwrap(),
    )
    .unwrap();
    let (ok, text) = verify_cli(&token, &stranger, &[]);
    assert!(!ok && text.contains("unknown key"), "{text}");
}
