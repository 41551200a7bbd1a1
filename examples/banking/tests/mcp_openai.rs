//! `banking serve --config` with the reference MCP server over stdio and an
//! OpenAI-compatible model: the model calls the server's `echo` tool, a
//! rule holds the call for finance, `holdpoint approve` (as an approver,
//! through the server) lets it run once, and the echoed text is in the
//! answer; the audit names the MCP server and tool, and `/metrics` counts
//! the call.
//!
//! The model is a local server speaking OpenAI's Chat Completions wire
//! format (no remote API can run here): it calls the tool whose name ends
//! in `echo`, then answers with what the tool returned.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

const EVERYTHING_DEFAULT: &str =
    "/var/tmp/holdpoint-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const ALICE: &str = "k-alice-0123456789";
const OLGA: &str = "k-olga-0123456789";

fn everything() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("HOLDPOINT_MCP_EVERYTHING").unwrap_or_else(|_| EVERYTHING_DEFAULT.into()));
    if path.exists() {
        return Some(path);
    }
    let hint = "npm install --prefix /var/tmp/holdpoint-npm @modelcontextprotocol/server-everything, or set HOLDPOINT_MCP_EVERYTHING";
    if std::env::var_os("CI").is_some() {
        panic!("@modelcontextprotocol/server-everything is not installed ({hint})");
    }
    eprintln!("skipped: @modelcontextprotocol/server-everything is not installed ({hint})");
    None
}

/// What the model server was asked, in order.
type Requests = Arc<Mutex<Vec<Value>>>;

/// One Chat Completions answer: a call of the offered `*echo` tool, or,
/// after a tool result, text that repeats it.
async fn completions(State(seen): State<Requests>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    seen.lock().unwrap().push(body.clone());
    if body["stream"] == json!(true) {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "this test server does not stream"}})),
        );
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let (message, finish) = if last["role"] == "tool" {
        let said = match &last["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        (
            json!({"role": "assistant", "content": format!("The tool said: {said}")}),
            "stop",
        )
    } else {
        let echo = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|n| n.ends_with("echo"))
            .expect("an echo tool offered to the model")
            .to_owned();
        let call = json!({
            "id": "call_echo_1",
            "type": "function",
            "function": {"name": echo, "arguments": json!({"message": "hello from the approval test"}).to_string()},
        });
        (
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
        )
    };
    let reply = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_764_547_200,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
    });
    (StatusCode::OK, Json(reply))
}

async fn model_server() -> (String, Requests) {
    let seen = Requests::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

/// `banking serve --config` on the local model server, its log on
/// standard error.
fn serve(config: &std::path::Path, model_url: &str) -> common::Served {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = common::serve_command(&data);
    cmd.args(["--store", "memory:", "--model", "openai/gpt-4o-mini"])
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data.path())
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        .env("OPENAI_BASE_URL", model_url)
        .stderr(Stdio::inherit());
    common::start(cmd, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_echo_held_by_a_rule_runs_once_after_holdpoint_approve() {
    let Some(bin) = everything() else { return };
    let (model_url, seen) = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[auth.api_keys]]
principal = "alice"
key = "{ALICE}"
roles = ["customer"]

[[auth.api_keys]]
principal = "olga"
key = "{OLGA}"
roles = ["finance"]

[[mcp.servers]]
name = "everything"
command = "node"
args = [{bin:?}, "stdio"]

[[approval.rules]]
agent = "bankingAgent"
tool = "everything_echo"
approvers = ["finance"]
self_approval = false
"#,
            bin = bin.to_string_lossy()
        ),
    )
    .unwrap();
    let served = serve(&config, &model_url);
    let http = reqwest::Client::new();
    let agent_url = format!("{}/agents/bankingAgent", served.base);

    let paused: Value = http
        .post(&agent_url)
        .header("X-API-Key", ALICE)
        .json(&json!({"data": {"message": {"role": "user", "content": [{"text": "Please echo a greeting"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let result = &paused["result"];
    assert_eq!(result["finishReason"], "interrupted", "{paused}");
    let request = &result["message"]["content"][0];
    assert_eq!(request["toolRequest"]["name"], "everything_echo", "{paused}");
    assert_eq!(
        request["metadata"]["interruptedBy"], "holdpoint/approvalRule",
        "{paused}"
    );
    let snapshot = result["snapshotId"].as_str().unwrap().to_owned();
    let session = result["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(seen.lock().unwrap().len(), 1, "one model call before the hold");

    // The customer may not approve their own held call; nothing changes.
    let refused = holdpoint_cli::run_from(
        [
            "holdpoint",
            "--server",
            &served.base,
            "--api-key",
            ALICE,
            "approve",
            &snapshot,
        ],
        Vec::new(),
    )
    .await;
    assert!(refused.is_err(), "self-approval is off for this rule");
    assert_eq!(seen.lock().unwrap().len(), 1);

    // The approver answers with the operator CLI (the ref left out: the
    // snapshot holds one call).
    holdpoint_cli::run_from(
        [
            "holdpoint",
            "--server",
            &served.base,
            "--api-key",
            OLGA,
            "approve",
            &snapshot,
        ],
        Vec::new(),
    )
    .await
    .unwrap();

    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "the resumed turn asked the model once more");
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("the tool's result went to the model");
    assert!(
        tool_message.to_string().contains("Echo: hello from the approval test"),
        "{tool_message}"
    );

    let latest: Value = http
        .post(format!("{agent_url}/getSnapshot"))
        .header("X-API-Key", ALICE)
        .json(&json!({"data": {"sessionId": session}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = latest.to_string();
    assert!(
        text.contains("The tool said: Echo: hello from the approval test"),
        "{latest}"
    );

    let audit: Value = http
        .get(format!("{}/audit", served.base))
        .header("X-API-Key", OLGA)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = audit.to_string();
    assert!(rows.contains(r#""decision":"approve""#), "{audit}");
    assert!(rows.contains(r#""actor":"olga""#), "{audit}");
    assert!(
        rows.contains(r#""mcp":{"server":"everything","tool":"echo"}"#),
        "{audit}"
    );

    let metrics = http
        .get(format!("{}/metrics", served.base))
        .header("X-API-Key", OLGA)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let ran = metrics
        .lines()
        .find(|l| {
            l.starts_with("holdpoint_tool_calls_total")
                && l.contains(r#"tool="everything_echo""#)
                && l.contains(r#"outcome="output""#)
        })
        .unwrap_or_else(|| panic!("no count of everything_echo's runs in:\n{metrics}"));
    assert!(ran.ends_with(" 1"), "the MCP tool ran once: {ran}");
}
