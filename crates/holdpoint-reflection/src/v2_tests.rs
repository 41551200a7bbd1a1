//! Reflection v2 against a WebSocket server in the test that speaks the
//! CLI's side of the protocol as genkit-tools' `manager-v2.ts` does (the
//! run through genkit-cli itself is examples/banking/tests/genkit_cli.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use holdpoint::ScriptedTurn;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use super::Reflection;
use super::tests::{bank, telemetry};

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// The next JSON message (a guard, not a timing assertion: a runtime that
/// goes quiet fails the test instead of hanging it).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("the runtime went quiet")
            .expect("the runtime closed the connection")
            .unwrap();
        if let Message::Text(text) = frame {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

/// Messages up to and including the response to request `id`.
async fn until_response(ws: &mut Ws, id: &str) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let message = next(ws).await;
        if message.get("method").is_none() && message["id"] == id {
            return (before, message);
        }
        before.push(message);
    }
}

async fn send(ws: &mut Ws, message: Value) {
    ws.send(Message::text(message.to_string())).await.unwrap();
}

async fn request(ws: &mut Ws, id: &str, method: &str, params: Value) -> (Vec<Value>, Value) {
    send(
        ws,
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .await;
    until_response(ws, id).await
}

async fn notify(ws: &mut Ws, method: &str, params: Value) {
    send(ws, json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
}

/// Accepts the runtime's connection and answers its registration with
/// `telemetry`; returns the registration's params.
async fn accept(listener: &TcpListener, telemetry: &str) -> (Ws, Value) {
    let (tcp, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .expect("the runtime never connected")
        .unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let register = next(&mut ws).await;
    assert_eq!(register["jsonrpc"], "2.0");
    assert_eq!(register["method"], "register", "{register}");
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "result": {"telemetryServerUrl": telemetry}, "id": register["id"]}),
    )
    .await;
    (ws, register["params"].clone())
}

fn user(text: &str) -> Value {
    json!({"message": {"role": "user", "content": [{"text": text}]}})
}

#[tokio::test]
async fn v2_registers_lists_and_runs_a_bidi_conversation() {
    let (agents, model) = bank();
    model.push(ScriptedTurn::streamed_text(["Hello ", "there"]));
    model.push(ScriptedTurn::tool_call("transferMoney", json!({"amount": 500})));
    let (base, traces) = telemetry().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let start = tokio::spawn(Reflection::new().v2_server(url.clone()).start(agents));
    let (mut ws, params) = accept(&listener, &base).await;
    let handle = start.await.unwrap().unwrap();
    assert_eq!(handle.v2_server(), Some(url.as_str()));
    assert!(handle.addr().is_none() && handle.runtime_file().is_none());
    assert_eq!(params["pid"], std::process::id());
    assert_eq!(params["reflectionApiSpecVersion"], 1);
    assert_eq!(params["envs"], json!(["dev"]));
    assert!(
        params["id"].is_string() && params["genkitVersion"].is_string(),
        "{params}"
    );

    let (_, listed) = request(&mut ws, "1", "listActions", Value::Null).await;
    let actions = &listed["result"]["actions"];
    assert_eq!(actions["/agent/bankingAgent"]["metadata"]["bidi"], true, "{listed}");
    assert_eq!(actions["/tool/transferMoney"]["metadata"]["type"], "tool");
    assert!(actions["/model/scripted"]["metadata"]["model"].is_object());

    // A bidirectional run: two inputs, then the end of the input stream.
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": "2", "method": "runAction", "params": {
            "key": "/agent/bankingAgent", "input": null, "stream": true, "streamInput": true}}),
    )
    .await;
    let state = next(&mut ws).await;
    assert_eq!(state["method"], "runActionState", "{state}");
    assert_eq!(state["params"]["requestId"], "2");
    let trace_id = state["params"]["state"]["traceId"].as_str().unwrap().to_owned();
    for text in ["hi", "move $500"] {
        notify(
            &mut ws,
            "sendInputStreamChunk",
            json!({"requestId": "2", "chunk": user(text)}),
        )
        .await;
    }
    notify(&mut ws, "endInputStream", json!({"requestId": "2"})).await;
    let (notes, answer) = until_response(&mut ws, "2").await;
    // The JSON-RPC result is Genkit's `{result, telemetry}`.
    let done = &answer["result"];
    let chunks: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "streamChunk")
        .inspect(|n| assert_eq!(n["params"]["requestId"], "2"))
        .map(|n| &n["params"]["chunk"])
        .collect();
    let ends: Vec<&Value> = chunks.iter().filter_map(|c| c.get("turnEnd")).collect();
    assert_eq!(ends.len(), 2, "{notes:?}");
    assert_eq!(ends[0]["finishReason"], "stop");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["modelChunk"]["content"].as_array())
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "Hello there");
    assert_eq!(done["result"]["finishReason"], "interrupted", "{done}");
    assert_eq!(done["telemetry"]["traceId"], trace_id.as_str());
    // Both turns ran in one session: the second saw the first.
    let second = &model.requests()[1].messages;
    let texts: Vec<String> = second.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["hi", "Hello there", "move $500"]);
    // The trace went where the registration said, before the answer.
    assert!(
        traces.lock().unwrap().iter().any(|t| t["traceId"] == trace_id.as_str()),
        "the trace was sent"
    );

    // A plain run resumes it.
    model.push(ScriptedTurn::text("Done"));
    let mut restart = done["result"]["message"]["content"][0].clone();
    restart["metadata"] = json!({"resumed": {"approved": true}});
    let (_, resumed) = request(
        &mut ws,
        "3",
        "runAction",
        json!({"key": "/agent/bankingAgent", "input": {"resume": {"restart": [restart]}},
            "init": {"snapshotId": done["result"]["snapshotId"]}}),
    )
    .await;
    assert_eq!(resumed["result"]["result"]["finishReason"], "stop", "{resumed}");
}

#[tokio::test]
async fn v2_errors_cancel_and_reconnect() {
    let (agents, _) = bank();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let start = tokio::spawn(Reflection::new().v2_server(url).start(agents));
    let (mut ws, first) = accept(&listener, "http://127.0.0.1:9").await;
    let _handle = start.await.unwrap().unwrap();

    let (_, missing) = request(&mut ws, "1", "runAction", json!({"key": "/agent/nope", "input": {}})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let (_, paused) = request(
        &mut ws,
        "2",
        "runAction",
        json!({"key": "/tool/transferMoney", "input": {"amount": 5}}),
    )
    .await;
    assert_eq!(paused["error"]["code"], -32000, "{paused}");
    assert_eq!(paused["error"]["data"]["code"], 13);
    assert!(paused["error"]["data"]["details"]["interrupt"].is_object(), "{paused}");
    assert!(paused["error"]["data"]["details"]["traceId"].is_string());
    let (_, unknown) = request(&mut ws, "3", "cancelAction", json!({"traceId": "none"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
    let (_, bogus) = request(&mut ws, "4", "bogus", json!({})).await;
    assert_eq!(bogus["error"]["code"], -32601);
    let (_, values) = request(&mut ws, "5", "listValues", json!({"type": "prompt"})).await;
    assert_eq!(values["error"]["code"], -32602);
    let (_, values) = request(&mut ws, "6", "listValues", json!({"type": "defaultModel"})).await;
    assert_eq!(values["result"]["values"], json!({}));

    // Cancelling a call that never returns ends it with CANCELLED.
    send(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": "7", "method": "runAction",
            "params": {"key": "/tool/waitForever", "input": {"account": "a"}}}),
    )
    .await;
    let state = next(&mut ws).await;
    let trace_id = state["params"]["state"]["traceId"].clone();
    let mut cancelled = Value::Null;
    for i in 0..200 {
        let id = format!("c{i}");
        let (_, answer) = request(&mut ws, &id, "cancelAction", json!({"traceId": trace_id})).await;
        if answer.get("result").is_some() {
            cancelled = answer;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(cancelled["result"]["message"], "Action cancelled");
    let (_, ended) = until_response(&mut ws, "7").await;
    assert_eq!(ended["error"]["data"]["code"], 1, "{ended}");

    // The CLI goes away and comes back: the runtime registers again.
    ws.close(None).await.unwrap();
    drop(ws);
    let (_ws, again) = accept(&listener, "http://127.0.0.1:9").await;
    assert_eq!(again["id"], first["id"]);
}

#[test]
fn v2_connects_to_loopback_ws_addresses_only() {
    for ok in ["ws://localhost:3200", "ws://127.0.0.1:3200", "ws://[::1]:3200"] {
        assert!(super::v2::check_loopback(ok).is_ok(), "{ok}");
    }
    for bad in [
        "ws://example.com:3200",
        "ws://10.0.0.1:3200",
        "wss://localhost:3200",
        "http://localhost:1",
        "nope",
    ] {
        assert!(super::v2::check_loopback(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn v2_start_refuses_a_remote_server() {
    let (agents, _) = bank();
    let err = Reflection::new()
        .v2_server("ws://192.0.2.1:3200")
        .start(agents)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, super::ReflectionError::Connect { reason, .. } if reason.contains("loopback")),
        "{err}"
    );
}

#[tokio::test]
async fn v2_a_gated_tool_is_held_and_does_not_run() {
    let (agents, _, effects) = super::guard_tests::gated_bank();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let start = tokio::spawn(Reflection::new().v2_server(url).start(agents));
    // A registration answer naming a remote telemetry server is ignored
    // (`set_telemetry`; see v2_configure_cannot_send_traces_away_either).
    let (mut ws, _) = accept(&listener, "http://evil.example:4033").await;
    let handle = start.await.unwrap().unwrap();
    let (_, held) = request(
        &mut ws,
        "1",
        "runAction",
        json!({"key": "/tool/closeAccount", "input": {"account": "savings"}}),
    )
    .await;
    assert_eq!(held["error"]["code"], -32000, "{held}");
    assert_eq!(
        held["error"]["data"]["details"]["interruptedBy"],
        holdpoint::middleware::TOOL_APPROVAL,
        "{held}"
    );
    let (_, free) = request(
        &mut ws,
        "2",
        "runAction",
        json!({"key": "/tool/getBalance", "input": {"account": "savings"}}),
    )
    .await;
    assert_eq!(free["result"]["result"], "savings: $1200", "{free}");
    assert_eq!(
        effects.closed.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "closeAccount ran"
    );
    drop(handle);
}
