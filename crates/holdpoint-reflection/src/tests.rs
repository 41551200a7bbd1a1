#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use holdpoint::agent::Agent;
use holdpoint::session::InMemoryStore;
use holdpoint::{ResumableTool, ScriptedModel, ScriptedTurn, ToolContext};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::Reflection;
use super::runtime;

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    amount: f64,
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
struct Approval {
    approved: bool,
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Account {
    account: String,
}

pub(super) fn bank() -> (BTreeMap<String, Agent>, ScriptedModel) {
    let tool: ResumableTool<Transfer, String, Approval> = ResumableTool::define(
        "transferMoney",
        "Transfers money; needs approval",
        |ctx: ToolContext, _t: Transfer, approval: Option<Approval>| async move {
            match approval {
                None => Err(ctx.interrupt(json!({"details": "Transfer $500 to savings"}))),
                Some(_) => Ok("txn-1".to_string()),
            }
        },
    )
    .unwrap();
    let balance = holdpoint::tool(
        "getBalance",
        "The balance of an account",
        |_ctx: ToolContext, account: Account| async move { Ok(format!("{}: $1200", account.account)) },
    );
    // Never answers: for cancelling a running call.
    let stuck = holdpoint::tool(
        "waitForever",
        "Never returns",
        |_ctx: ToolContext, _a: Account| async move {
            futures::future::pending::<Result<String, holdpoint::ToolError>>().await
        },
    );
    let model = ScriptedModel::new("scripted");
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model.clone()))
        .tool(tool)
        .tool(balance)
        .tool(stuck)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    (BTreeMap::from([("bankingAgent".to_owned(), agent)]), model)
}

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, String, Option<String>) {
    // As the Genkit CLI sends them: a loopback Host, JSON bodies.
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:3400")
        .header("content-type", "application/json");
    let request = request
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let trace = response
        .headers()
        .get("x-genkit-trace-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap(), trace)
}

/// A telemetry server that keeps what it is sent.
pub(super) async fn telemetry() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/api/traces",
        axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
            let keep = Arc::clone(&keep);
            async move {
                keep.lock().unwrap().push(v);
                "OK"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, got)
}

#[tokio::test]
async fn health_and_actions_list_the_agent_with_its_companions() {
    let (agents, _) = bank();
    let app = Reflection::new().router(agents, "rt-1");
    assert_eq!(call(&app, "GET", "/api/__health", None).await.0, StatusCode::OK);
    assert_eq!(call(&app, "GET", "/api/__health?id=rt-1", None).await.0, StatusCode::OK);
    assert_eq!(
        call(&app, "GET", "/api/__health?id=other", None).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let (status, body, _) = call(&app, "GET", "/api/actions", None).await;
    assert_eq!(status, StatusCode::OK);
    let actions: Value = serde_json::from_str(&body).unwrap();
    let agent = &actions["/agent/bankingAgent"];
    assert_eq!(agent["key"], "/agent/bankingAgent");
    assert_eq!(agent["metadata"]["agent"]["stateManagement"], "server");
    assert_eq!(agent["metadata"]["agent"]["abortable"], true);
    assert_eq!(agent["metadata"]["bidi"], true);
    assert_eq!(actions["/agent-snapshot/bankingAgent"]["name"], "bankingAgent");
    assert_eq!(actions["/agent-abort/bankingAgent"]["name"], "bankingAgent");
}

#[tokio::test]
async fn a_turn_pauses_streams_resumes_and_is_traced() {
    let (agents, model) = bank();
    model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500})));
    model.push(ScriptedTurn::streamed_text(["Done: ", "txn-1"]));
    let (base, traces) = telemetry().await;
    let app = Reflection::new().router(agents, "rt-1");
    // Traces go where the CLI says.
    let (status, _, _) = call(
        &app,
        "POST",
        "/api/notify",
        Some(json!({"telemetryServerUrl": base, "reflectionApiSpecVersion": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    let input = json!({"message": {"role": "user", "content": [{"text": "Transfer $500"}]}});
    let (status, body, trace_id) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/agent/bankingAgent", "input": input})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_str(&body).unwrap();
    let out = &answer["result"];
    assert_eq!(out["finishReason"], "interrupted", "{body}");
    let trace_id = trace_id.expect("an early trace id header");
    assert_eq!(answer["telemetry"]["traceId"], trace_id.as_str());
    {
        let traces = traces.lock().unwrap();
        let trace = traces
            .iter()
            .find(|t| t["traceId"] == trace_id.as_str())
            .expect("the trace was sent");
        let spans: Vec<&Value> = trace["spans"].as_object().unwrap().values().collect();
        let root = spans.iter().find(|s| s["attributes"]["genkit:isRoot"] == true).unwrap();
        assert_eq!(root["attributes"]["genkit:metadata:subtype"], "agent");
        assert_eq!(root["attributes"]["genkit:name"], "bankingAgent");
        let tool = spans
            .iter()
            .find(|s| s["attributes"]["genkit:name"] == "transferMoney")
            .expect("a span for the paused call");
        assert_eq!(tool["parentSpanId"], root["spanId"]);
        let interrupt: Value =
            serde_json::from_str(tool["attributes"]["genkit:metadata:interrupt"].as_str().unwrap()).unwrap();
        assert_eq!(interrupt["details"], "Transfer $500 to savings");
    }

    // Resume through a streamed run: NDJSON chunks, then the result line.
    let mut restart = out["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("toolRequest").is_some())
        .unwrap()
        .clone();
    restart["metadata"] = json!({"resumed": {"approved": true}});
    let (status, body, _) = call(
        &app,
        "POST",
        "/api/runAction?stream=true",
        Some(json!({
            "key": "/agent/bankingAgent",
            "input": {"resume": {"restart": [restart]}},
            "init": {"snapshotId": out["snapshotId"]},
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = lines.last().unwrap();
    assert_eq!(last["result"]["finishReason"], "stop", "{body}");
    let text: String = lines[..lines.len() - 1]
        .iter()
        .filter_map(|c| c["modelChunk"]["content"].as_array())
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "Done: txn-1");
    assert!(lines.iter().any(|c| c.get("turnEnd").is_some()), "{body}");

    // The same answer again lost the exactly-once claim.
    let (_, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({
            "key": "/agent/bankingAgent",
            "input": {"resume": {"restart": [restart]}},
            "init": {"snapshotId": out["snapshotId"]},
        })),
    )
    .await;
    let again: Value = serde_json::from_str(&body).unwrap();
    assert_ne!(again["result"]["finishReason"], "stop", "{body}");

    // The companion actions read the snapshot and abort (a settled one
    // keeps its status).
    let session = out["sessionId"].clone();
    let (_, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/agent-snapshot/bankingAgent", "input": {"sessionId": session}})),
    )
    .await;
    let snap: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(snap["result"]["sessionId"], session, "{body}");
    let (_, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/agent-abort/bankingAgent", "input": {"snapshotId": snap["result"]["snapshotId"]}})),
    )
    .await;
    let aborted: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(aborted["result"]["status"], "completed", "{body}");
}

#[tokio::test]
async fn bad_requests_are_typed_errors() {
    let (agents, _) = bank();
    let app = Reflection::new().router(agents, "rt-1");
    let (status, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/agent/nope", "input": {}})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("NOT_FOUND"), "{body}");
    let (status, _, _) = call(&app, "POST", "/api/runAction", Some(json!({"input": {}}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A malformed input is an error frame, not a turn.
    let (status, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/agent/bankingAgent", "input": {"message": 7}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], 3, "{body}");
    let (status, _, _) = call(&app, "POST", "/api/cancelAction", Some(json!({"traceId": "none"}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&app, "POST", "/api/cancelAction", Some(json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn start_writes_a_runtime_file_and_drop_removes_it() {
    let (agents, _) = bank();
    let dir = tempfile::tempdir().unwrap();
    let handle = Reflection::new().project_root(dir.path()).start(agents).await.unwrap();
    let file = handle.runtime_file().unwrap().to_path_buf();
    assert!(file.starts_with(dir.path().join(".genkit/runtimes")));
    let info: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(info["pid"], std::process::id());
    assert_eq!(
        info["reflectionServerUrl"],
        format!("http://{}", handle.addr().unwrap())
    );
    assert_eq!(info["reflectionApiSpecVersion"], 1);
    assert!(handle.addr().unwrap().ip().is_loopback());
    drop(handle);
    assert!(!file.exists());
}

#[test]
fn the_project_root_is_the_nearest_marker_directory_else_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    assert_eq!(runtime::root_from(&deep), deep);
    std::fs::write(dir.path().join("a/package.json"), "{}").unwrap();
    assert_eq!(runtime::root_from(&deep), dir.path().join("a"));
}

#[test]
fn off_unless_genkit_env_is_dev() {
    // The variable is read, not written, so parallel tests are unaffected.
    if std::env::var("GENKIT_ENV").as_deref() != Ok("dev") {
        assert!(Reflection::from_env().is_none());
    }
}

#[tokio::test]
async fn actions_list_the_tools_and_models_with_genkit_metadata() {
    let (agents, _) = bank();
    let app = Reflection::new().router(agents, "rt-1");
    let (_, body, _) = call(&app, "GET", "/api/actions", None).await;
    let actions: Value = serde_json::from_str(&body).unwrap();
    let tool = &actions["/tool/transferMoney"];
    assert_eq!(tool["key"], "/tool/transferMoney", "{body}");
    assert_eq!(tool["name"], "transferMoney");
    assert_eq!(tool["description"], "Transfers money; needs approval");
    assert_eq!(tool["metadata"]["type"], "tool");
    assert_eq!(tool["inputSchema"]["properties"]["amount"]["type"], "number", "{tool}");
    assert!(tool["outputSchema"].is_object(), "{tool}");
    assert_eq!(actions["/tool/getBalance"]["metadata"]["type"], "tool");
    let model = &actions["/model/scripted"];
    assert_eq!(model["key"], "/model/scripted", "{body}");
    assert_eq!(model["metadata"]["model"]["label"], "scripted");
    assert_eq!(model["metadata"]["model"]["supports"]["tools"], true);
    assert_eq!(model["metadata"]["model"]["supports"]["multiturn"], true);
    assert!(model["inputSchema"]["properties"]["messages"].is_object(), "{model}");
    assert!(
        model["outputSchema"]["properties"]["finishReason"].is_object(),
        "{model}"
    );
}

#[tokio::test]
async fn a_tool_action_runs_once_and_an_interrupt_is_an_error_with_its_data() {
    let (agents, _) = bank();
    let (base, traces) = telemetry().await;
    let app = Reflection::new().telemetry_server(base).router(agents, "rt-1");
    let (status, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/tool/getBalance", "input": {"account": "checking"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"], "checking: $1200", "{body}");

    // A tool that pauses fails the run as Genkit's ToolInterruptError does,
    // with the interrupt data beside the trace id.
    let (_, body, trace_id) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/tool/transferMoney", "input": {"amount": 500}})),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], 13, "{body}");
    assert_eq!(
        answer["error"]["details"]["interrupt"]["details"], "Transfer $500 to savings",
        "{body}"
    );
    let trace_id = trace_id.unwrap();
    assert_eq!(answer["error"]["details"]["traceId"], trace_id.as_str());
    {
        let traces = traces.lock().unwrap();
        let trace = traces.iter().find(|t| t["traceId"] == trace_id.as_str()).unwrap();
        let root = trace["spans"].as_object().unwrap().values().next().unwrap();
        assert_eq!(root["attributes"]["genkit:metadata:subtype"], "tool");
        assert_eq!(root["attributes"]["genkit:key"], "/tool/transferMoney");
        assert!(root["attributes"]["genkit:metadata:interrupt"].is_string(), "{root}");
    }

    // Bad input is a typed error, and an unknown tool is not found.
    let (_, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/tool/getBalance", "input": {"account": 7}})),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], 3, "{body}");
    let (status, _, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/tool/nope", "input": {}})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_model_action_runs_and_streams_its_chunks() {
    let (agents, model) = bank();
    model.push(ScriptedTurn::streamed_text(["Hello ", "there"]));
    let app = Reflection::new().router(agents, "rt-1");
    let request = json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]});
    let (status, body, _) = call(
        &app,
        "POST",
        "/api/runAction?stream=true",
        Some(json!({"key": "/model/scripted", "input": request})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (last, chunks) = lines.split_last().unwrap();
    let streamed: String = chunks
        .iter()
        .flat_map(|c| c["content"].as_array().unwrap().iter())
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(streamed, "Hello there", "{body}");
    assert_eq!(last["result"]["finishReason"], "stop", "{body}");
    assert_eq!(last["result"]["message"]["content"][0]["text"], "Hello there", "{body}");
    assert!(last["result"]["latencyMs"].is_number(), "{body}");
    assert_eq!(model.requests()[0].messages[0].text(), "hi");

    let (_, body, _) = call(
        &app,
        "POST",
        "/api/runAction",
        Some(json!({"key": "/model/scripted", "input": {"messages": "no"}})),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["error"]["code"], 3, "{body}");
}

#[tokio::test]
async fn cancel_action_stops_a_running_tool_call() {
    let (agents, _) = bank();
    let app = Reflection::new().router(agents, "rt-1");
    let request = Request::post("/api/runAction")
        .header("host", "localhost:3400")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"key": "/tool/waitForever", "input": {"account": "a"}}).to_string(),
        ))
        .unwrap();
    // The trace id comes first, in the headers, while the call runs.
    let response = app.clone().oneshot(request).await.unwrap();
    let trace_id = response.headers()["x-genkit-trace-id"].to_str().unwrap().to_owned();
    let mut cancelled = false;
    for _ in 0..200 {
        let (status, _, _) = call(&app, "POST", "/api/cancelAction", Some(json!({"traceId": trace_id}))).await;
        if status == StatusCode::OK {
            cancelled = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(cancelled, "the call was never seen running");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["error"]["code"], 1, "{answer}");
    assert_eq!(answer["error"]["details"]["traceId"], trace_id.as_str());
}
