//! Genkit's reflection API v2: the runtime connects to the CLI's WebSocket
//! server (`GENKIT_REFLECTION_V2_SERVER`, what `genkit start
//! --experimental-reflection-v2` sets) and answers its JSON-RPC 2.0
//! requests, the wire of Genkit's `js/core/src/reflection-v2.ts` and the
//! CLI's `manager-v2.ts` (docs/reference.md §18).
//!
//! | message | direction | what |
//! |---|---|---|
//! | `register` (request) | runtime → CLI | `{id, pid, name, genkitVersion, reflectionApiSpecVersion, envs}`; the result may name the telemetry server |
//! | `listActions` | CLI → runtime | `{actions: {key: action}}` |
//! | `listValues` | CLI → runtime | `{type}` (`defaultModel`, `middleware`) → `{values}` |
//! | `runAction` | CLI → runtime | `{key, input, init?, stream?, streamInput?}` → `{result, telemetry: {traceId}}` |
//! | `runActionState`, `streamChunk` (notifications) | runtime → CLI | `{requestId, state: {traceId}}` first, then `{requestId, chunk}` |
//! | `sendInputStreamChunk`, `endInputStream` (notifications) | CLI → runtime | a bidirectional run's inputs, then their end |
//! | `cancelAction` | CLI → runtime | `{traceId}` → `{message}` |
//! | `configure` (notification) | CLI → runtime | `{telemetryServerUrl}` |
//!
//! A failed run is a JSON-RPC error `-32000` whose `data` is Genkit's
//! `Status` (`{code, message, details: {traceId}}`); an unknown action or
//! bad params `-32602`; an unknown method `-32601`. When the connection
//! drops, the open input streams end and the runtime reconnects (500 ms
//! doubling to 5 s, as Genkit's runtimes do) until its handle is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::actions;
use super::run::{self, RunRequest, Sink};
use super::trace::{self, Trace};
use super::{REFLECTION_API_SPEC_VERSION, Shared};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const SERVER_ERROR: i64 = -32000;

/// The id of the one request the runtime sends (`register`).
const REGISTER_ID: &str = "register-1";

/// Checks that `url` is a `ws://` address on this machine (`localhost` or a
/// loopback IP), as the CLI's is: the connection gets the run of every
/// agent with no principal, so it never leaves the machine.
pub(crate) fn check_loopback(url: &str) -> Result<(), String> {
    let uri: axum::http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme_str() != Some("ws") {
        return Err("expected a ws:// URL".into());
    }
    let host = uri.host().unwrap_or_default();
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    let loopback =
        host.eq_ignore_ascii_case("localhost") || ip.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        Ok(())
    } else {
        Err(format!(
            "{host} is not a loopback address; the reflection API stays on this machine"
        ))
    }
}

/// Opens the WebSocket to the CLI (a loopback `ws://` address only).
pub(crate) async fn connect(url: &str) -> Result<Ws, String> {
    check_loopback(url)?;
    let (ws, _) = tokio_tungstenite::connect_async(url).await.map_err(|e| e.to_string())?;
    Ok(ws)
}

/// Serves `first` and, after it drops, reconnects to `url` for as long as
/// the task runs.
pub(crate) async fn session(shared: Shared, url: String, first: Ws) {
    let mut ws = first;
    loop {
        serve(&shared, ws).await;
        let mut attempt = 0u32;
        ws = loop {
            let delay = Duration::from_millis(500u64 << attempt.min(4)).min(Duration::from_secs(5));
            tokio::time::sleep(delay).await;
            match connect(&url).await {
                Ok(ws) => break ws,
                Err(e) => {
                    tracing::debug!(error = %e, %url, "reflection v2: reconnect failed");
                    attempt = attempt.saturating_add(1);
                }
            }
        };
    }
}

/// One connection's state: where messages go out, and the input streams
/// of its bidirectional runs by request id.
#[derive(Clone)]
struct Peer {
    out: mpsc::UnboundedSender<Value>,
    inputs: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>>,
}

impl Peer {
    fn send(&self, message: Value) {
        let _ = self.out.send(message);
    }

    fn respond(&self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "result": result, "id": id}));
    }

    fn fail(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut error = json!({"code": code, "message": message});
        if let Some(data) = data {
            error["data"] = data;
        }
        self.send(json!({"jsonrpc": "2.0", "error": error, "id": id}));
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn open_inputs(&self, request: &str) -> mpsc::UnboundedReceiver<Value> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut inputs) = self.inputs.lock() {
            inputs.insert(request.to_owned(), tx);
        }
        rx
    }

    /// Ends a run's input stream (dropping its sender ends the stream).
    fn close_inputs(&self, request: &str) {
        if let Ok(mut inputs) = self.inputs.lock() {
            inputs.remove(request);
        }
    }
}

/// A request id as a map key (the CLI sends strings; numbers are allowed).
fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Registers, then answers the CLI's messages until the connection ends.
async fn serve(shared: &Shared, ws: Ws) {
    let (mut write, mut read) = ws.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(message) = out_rx.recv().await {
            if write.send(Message::text(message.to_string())).await.is_err() {
                break;
            }
        }
        let _ = write.close().await;
    });
    let peer = Peer {
        out,
        inputs: Arc::new(Mutex::new(HashMap::new())),
    };
    peer.send(json!({
        "jsonrpc": "2.0",
        "id": REGISTER_ID,
        "method": "register",
        "params": {
            "id": shared.runtime_id,
            "pid": std::process::id(),
            "name": "holdpoint",
            "genkitVersion": concat!("holdpoint/", env!("CARGO_PKG_VERSION")),
            "reflectionApiSpecVersion": REFLECTION_API_SPEC_VERSION,
            "envs": ["dev"],
        },
    }));
    while let Some(frame) = read.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text.to_string(),
            Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(message)) => dispatch(shared, &peer, message),
            _ => tracing::debug!("reflection v2: a message that is not a JSON object"),
        }
    }
    // The open input streams end with the connection.
    if let Ok(mut inputs) = peer.inputs.lock() {
        inputs.clear();
    }
    drop(peer);
    writer.abort();
}

fn dispatch(shared: &Shared, peer: &Peer, message: Map<String, Value>) {
    let id = message.get("id").cloned().filter(|id| !id.is_null());
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response: only `register` expects one.
        if let Some(url) = message
            .get("result")
            .and_then(|r| r.get("telemetryServerUrl"))
            .and_then(Value::as_str)
        {
            shared.set_telemetry(url.to_owned());
        } else if let Some(error) = message.get("error") {
            tracing::warn!(%error, "reflection v2: the CLI refused the registration");
        }
        return;
    };
    match (method, id) {
        ("listActions", Some(id)) => peer.respond(&id, json!({"actions": actions::list(shared)})),
        ("listValues", Some(id)) => list_values(peer, &id, &params),
        ("runAction", Some(id)) => {
            let (shared, peer) = (shared.clone(), peer.clone());
            tokio::spawn(async move { run_action(&shared, &peer, id, params).await });
        }
        ("cancelAction", Some(id)) => cancel_action(shared, peer, &id, &params),
        ("configure", _) => {
            if let Some(url) = params.get("telemetryServerUrl").and_then(Value::as_str) {
                shared.set_telemetry(url.to_owned());
            }
        }
        ("sendInputStreamChunk", _) => {
            let request = params.get("requestId").map(id_key).unwrap_or_default();
            let chunk = params.get("chunk").cloned().unwrap_or(Value::Null);
            let sent = peer
                .inputs
                .lock()
                .ok()
                .and_then(|inputs| inputs.get(&request).map(|tx| tx.send(chunk).is_ok()));
            if sent != Some(true) {
                tracing::warn!(%request, "reflection v2: an input chunk for no open input stream");
            }
        }
        ("endInputStream", _) => {
            let request = params.get("requestId").map(id_key).unwrap_or_default();
            peer.close_inputs(&request);
        }
        (other, Some(id)) => peer.fail(&id, METHOD_NOT_FOUND, &format!("Method not found: {other}"), None),
        (other, None) => tracing::debug!(method = other, "reflection v2: an unknown notification"),
    }
}

fn list_values(peer: &Peer, id: &Value, params: &Value) {
    match params.get("type").and_then(Value::as_str) {
        // Holdpoint has no registry-wide default model or middleware.
        Some("defaultModel" | "middleware") => peer.respond(id, json!({"values": {}})),
        other => peer.fail(
            id,
            INVALID_PARAMS,
            &format!(
                "'type' {} is not supported. Only 'defaultModel' and 'middleware' are supported",
                other.unwrap_or("undefined")
            ),
            None,
        ),
    }
}

fn cancel_action(shared: &Shared, peer: &Peer, id: &Value, params: &Value) {
    let Some(trace_id) = params.get("traceId").and_then(Value::as_str) else {
        return peer.fail(id, INVALID_PARAMS, "invalid params: traceId is required", None);
    };
    match shared.untrack(trace_id) {
        Some(running) => {
            running.cancel();
            peer.respond(id, json!({"message": "Action cancelled"}));
        }
        None => peer.fail(id, INVALID_PARAMS, "Action not found or already completed", None),
    }
}

async fn run_action(shared: &Shared, peer: &Peer, id: Value, params: Value) {
    let flag = |name: &str| params.get(name).and_then(Value::as_bool).unwrap_or(false);
    let (stream, stream_input) = (flag("stream"), flag("streamInput"));
    let req: RunRequest = match serde_json::from_value(params) {
        Ok(req) => req,
        Err(e) => return peer.fail(&id, INVALID_PARAMS, &format!("invalid params: {e}"), None),
    };
    let Some(target) = actions::target(shared, &req.key) else {
        return peer.fail(&id, INVALID_PARAMS, &format!("action {} not found", req.key), None);
    };
    let (name, subtype) = target.name_and_type();
    let mut trace = Trace::start(&name, subtype, &req.key, &req.input);
    peer.notify(
        "runActionState",
        json!({"requestId": id, "state": {"traceId": trace.id}}),
    );
    let request = id_key(&id);
    let inputs = stream_input.then(|| peer.open_inputs(&request));
    let sink: Option<Sink> = stream.then(|| {
        let (peer, id) = (peer.clone(), id.clone());
        Arc::new(move |chunk: Value| peer.notify("streamChunk", json!({"requestId": id, "chunk": chunk}))) as Sink
    });
    let result = run::execute(shared, target, req, &mut trace, sink, inputs).await;
    peer.close_inputs(&request);
    match &result {
        Ok(out) => trace.finish(Ok(out)),
        Err(f) => trace.finish(Err(&f.body.message)),
    }
    // Traces are flushed before the result, as Genkit does.
    if let Some(base) = shared.telemetry() {
        trace::post(&shared.http, &base, &trace).await;
    }
    match result {
        Ok(out) => peer.respond(&id, json!({"result": out, "telemetry": {"traceId": trace.id}})),
        Err(f) => {
            let status = run::status_object(&f, &trace.id);
            peer.fail(&id, SERVER_ERROR, &f.body.message, Some(status));
        }
    }
}
