//! The reflection API's routes (the wire of Genkit's `js/core/src/reflection.ts`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, RunOptions};
use holdpoint::{ErrorBody, Status};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::trace::{self, Trace};
use super::{REFLECTION_API_SPEC_VERSION, Shared};

pub(crate) fn router(shared: Shared) -> Router {
    Router::new()
        .route("/api/__health", get(health))
        .route("/api/actions", get(actions))
        .route("/api/envs", get(|| async { Json(json!(["dev"])) }))
        .route("/api/runAction", post(run_action))
        .route("/api/notify", post(notify))
        .route("/api/cancelAction", post(cancel_action))
        .with_state(shared)
}

fn error(http: StatusCode, status: Status, message: impl Into<String>) -> Response {
    let body = json!({"error": {"status": status, "message": message.into()}});
    (http, Json(body)).into_response()
}

/// gRPC's number for `status` (Genkit's `StatusCodes`, the `code` of a
/// reflection error).
fn code(status: Status) -> u8 {
    match status {
        Status::Cancelled => 1,
        Status::InvalidArgument => 3,
        Status::DeadlineExceeded => 4,
        Status::NotFound => 5,
        Status::AlreadyExists => 6,
        Status::PermissionDenied => 7,
        Status::ResourceExhausted => 8,
        Status::FailedPrecondition => 9,
        Status::Aborted => 10,
        Status::Internal => 13,
        Status::Unavailable => 14,
        Status::Unauthenticated => 16,
    }
}

#[derive(Deserialize)]
struct HealthQuery {
    id: Option<String>,
}

async fn health(State(s): State<Shared>, Query(q): Query<HealthQuery>) -> Response {
    match q.id {
        Some(id) if id != s.runtime_id => (StatusCode::SERVICE_UNAVAILABLE, "Invalid runtime ID").into_response(),
        _ => (StatusCode::OK, "OK").into_response(),
    }
}

/// Genkit's schemas of the agent wire, enough for the Dev UI's forms.
fn schemas() -> (Value, Value, Value) {
    let input = json!({"type": "object", "properties": {
        "message": {"type": "object"},
        "resume": {"type": "object", "properties": {
            "respond": {"type": "array"}, "restart": {"type": "array"}}},
        "detach": {"type": "boolean"}}, "additionalProperties": false});
    let output = json!({"type": "object", "properties": {
        "sessionId": {"type": "string"}, "snapshotId": {"type": "string"},
        "state": {"type": "object"}, "message": {"type": "object"},
        "artifacts": {"type": "array"}, "finishReason": {"type": "string"},
        "error": {"type": "object"}}});
    let init = json!({"type": "object", "properties": {
        "snapshotId": {"type": "string"}, "sessionId": {"type": "string"},
        "state": {"type": "object"}}, "additionalProperties": false});
    (input, output, init)
}

fn agent_actions(agent: &Agent) -> Vec<(String, Value)> {
    let name = agent.name();
    let (input, output, init) = schemas();
    let server = agent.is_server_managed();
    let main = json!({
        "key": format!("/agent/{name}"),
        "name": name,
        "description": agent.description(),
        "inputSchema": input,
        "outputSchema": output,
        "metadata": {
            "type": "agent",
            "bidi": true,
            "initSchema": init,
            "agent": {
                "stateManagement": if server { "server" } else { "client" },
                "abortable": server,
            },
        },
    });
    let snapshot = json!({
        "key": format!("/agent-snapshot/{name}"),
        "name": name,
        "description": format!("Gets snapshot data for {name} by snapshotId or sessionId"),
        "inputSchema": {"type": "object", "properties": {
            "snapshotId": {"type": "string"}, "sessionId": {"type": "string"}}},
        "metadata": {"type": "agent-snapshot"},
    });
    let abort = json!({
        "key": format!("/agent-abort/{name}"),
        "name": name,
        "description": format!("Aborts {name} agent by snapshotId. Returns the snapshot id and its status before the abort."),
        "inputSchema": {"type": "object", "properties": {"snapshotId": {"type": "string"}},
            "required": ["snapshotId"]},
        "metadata": {"type": "agent-abort"},
    });
    let mut out = vec![(format!("/agent/{name}"), main)];
    // Only server-managed agents have snapshots to read or abort.
    if server {
        out.push((format!("/agent-snapshot/{name}"), snapshot));
        out.push((format!("/agent-abort/{name}"), abort));
    }
    out
}

async fn actions(State(s): State<Shared>) -> Json<Value> {
    let mut all = Map::new();
    for agent in s.agents.values() {
        for (key, action) in agent_actions(agent) {
            all.insert(key, action);
        }
    }
    Json(Value::Object(all))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NotifyBody {
    telemetry_server_url: Option<String>,
    reflection_api_spec_version: Option<u32>,
}

async fn notify(State(s): State<Shared>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<NotifyBody>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            Status::InvalidArgument,
            "expected {\"telemetryServerUrl\", \"reflectionApiSpecVersion\"}",
        );
    };
    if let Some(url) = body.telemetry_server_url {
        s.set_telemetry(url);
    }
    if body
        .reflection_api_spec_version
        .is_some_and(|v| v != REFLECTION_API_SPEC_VERSION)
    {
        tracing::warn!(
            cli = ?body.reflection_api_spec_version,
            ours = REFLECTION_API_SPEC_VERSION,
            "the Genkit CLI speaks another reflection API version"
        );
    }
    (StatusCode::OK, "OK").into_response()
}

async fn cancel_action(State(s): State<Shared>, body: Bytes) -> Response {
    let trace_id = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("traceId").and_then(Value::as_str).map(str::to_owned));
    let Some(trace_id) = trace_id else {
        return error(StatusCode::BAD_REQUEST, Status::InvalidArgument, "traceId is required");
    };
    match s.untrack(&trace_id) {
        Some(conn) => {
            conn.cancel();
            Json(json!({"message": "Action cancelled"})).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Action not found or already completed"})),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
struct RunQuery {
    stream: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunBody {
    key: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    init: Option<Value>,
}

/// What `key` names.
enum Target {
    Run(Agent),
    Snapshot(Agent),
    Abort(Agent),
}

fn target(s: &Shared, key: &str) -> Option<Target> {
    let (kind, name) = key.strip_prefix('/')?.split_once('/')?;
    let agent = s.agents.get(name)?.clone();
    match kind {
        "agent" => Some(Target::Run(agent)),
        "agent-snapshot" if agent.is_server_managed() => Some(Target::Snapshot(agent)),
        "agent-abort" if agent.is_server_managed() => Some(Target::Abort(agent)),
        _ => None,
    }
}

fn error_frame(body: &ErrorBody, trace_id: &str) -> Value {
    json!({"error": {
        "code": code(body.status),
        "status": body.status,
        "message": body.message,
        "details": {"traceId": trace_id},
    }})
}

fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, ErrorBody> {
    serde_json::from_value(value).map_err(|e| ErrorBody {
        status: Status::InvalidArgument,
        message: format!("{what}: {e}"),
    })
}

async fn run_action(State(s): State<Shared>, Query(q): Query<RunQuery>, body: Bytes) -> Response {
    let body: RunBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                Status::InvalidArgument,
                format!("expected {{\"key\", \"input\"}}: {e}"),
            );
        }
    };
    let Some(target) = target(&s, &body.key) else {
        return error(
            StatusCode::NOT_FOUND,
            Status::NotFound,
            format!("action {} not found", body.key),
        );
    };
    let stream = q.stream.as_deref() == Some("true");
    let (name, subtype) = match &target {
        Target::Run(a) => (a.name().to_owned(), "agent"),
        Target::Snapshot(a) => (a.name().to_owned(), "agent-snapshot"),
        Target::Abort(a) => (a.name().to_owned(), "agent-abort"),
    };
    let trace = Trace::start(&name, subtype, &body.input);
    let trace_id = trace.id.clone();
    let span_id = trace.root.id.clone();
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let worker = s.clone();
    tokio::spawn(async move {
        let (mut trace, result) = perform(&worker, target, body, trace, stream, &tx).await;
        let frame = match &result {
            Ok(out) => {
                trace.finish(Ok(out));
                json!({"result": out, "telemetry": {"traceId": trace.id}})
            }
            Err(e) => {
                trace.finish(Err(&e.message));
                error_frame(e, &trace.id)
            }
        };
        // Traces are flushed before the result, as Genkit does, so a
        // caller that reads the trace after the answer finds it.
        if let Some(base) = worker.telemetry() {
            trace::post(&worker.http, &base, &trace).await;
        }
        let _ = tx.send(Bytes::from(frame.to_string()));
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    })
    .boxed();
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    let content_type = if stream { "text/plain" } else { "application/json" };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&trace_id) {
        headers.insert("x-genkit-trace-id", v);
    }
    if let Ok(v) = HeaderValue::from_str(&span_id) {
        headers.insert("x-genkit-span-id", v);
    }
    headers.insert(
        "x-genkit-version",
        HeaderValue::from_static(concat!("holdpoint/", env!("CARGO_PKG_VERSION"))),
    );
    response
}

/// Runs what `target` names; a turn's chunks go to `tx` as NDJSON lines
/// when streaming.
async fn perform(
    s: &Shared,
    target: Target,
    body: RunBody,
    mut trace: Trace,
    stream: bool,
    tx: &mpsc::UnboundedSender<Bytes>,
) -> (Trace, Result<Value, ErrorBody>) {
    let result = match target {
        Target::Run(agent) => run_turn(s, &agent, body, &mut trace, stream, tx).await,
        Target::Snapshot(agent) => snapshot(&agent, body.input).await,
        Target::Abort(agent) => abort(&agent, body.input).await,
    };
    (trace, result)
}

async fn snapshot(agent: &Agent, input: Value) -> Result<Value, ErrorBody> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Lookup {
        snapshot_id: Option<String>,
        session_id: Option<String>,
    }
    let lookup: Lookup = decode(input, "expected {\"snapshotId\"} or {\"sessionId\"}")?;
    let found = match (&lookup.snapshot_id, &lookup.session_id) {
        (Some(id), _) => agent.snapshot(id, Access::Full).await,
        (None, Some(session)) => agent.latest_snapshot(session, Access::Full).await,
        (None, None) => {
            return Err(ErrorBody {
                status: Status::InvalidArgument,
                message: "give snapshotId or sessionId".into(),
            });
        }
    }
    .map_err(|e| e.body())?;
    let target = lookup.snapshot_id.or(lookup.session_id).unwrap_or_default();
    let snap = found.ok_or_else(|| ErrorBody {
        status: Status::NotFound,
        message: format!("Snapshot '{target}' not found for agent '{}'.", agent.name()),
    })?;
    serde_json::to_value(snap).map_err(|e| ErrorBody {
        status: Status::Internal,
        message: e.to_string(),
    })
}

async fn abort(agent: &Agent, input: Value) -> Result<Value, ErrorBody> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct AbortInput {
        snapshot_id: String,
    }
    let AbortInput { snapshot_id } = decode(input, "expected {\"snapshotId\"}")?;
    let previous = agent.abort(&snapshot_id, Access::Full).await.map_err(|e| e.body())?;
    Ok(json!({"snapshotId": snapshot_id, "status": previous}))
}

async fn run_turn(
    s: &Shared,
    agent: &Agent,
    body: RunBody,
    trace: &mut Trace,
    stream: bool,
    tx: &mpsc::UnboundedSender<Bytes>,
) -> Result<Value, ErrorBody> {
    let input: AgentInput = decode(body.input, "the input is not an AgentInput")?;
    let init: AgentInit = match body.init {
        None | Some(Value::Null) => AgentInit::default(),
        Some(v) => decode(v, "the init is not an AgentInit")?,
    };
    input.validate().map_err(|e| e.body())?;
    if let Some(Ok(Value::Object(r))) = input.resume.as_ref().map(serde_json::to_value) {
        for part in r.get("restart").and_then(Value::as_array).into_iter().flatten() {
            trace.tool_call(part, "resumed");
        }
    }
    let conn = Arc::new(agent.connect_with(RunOptions::new(init)).await.map_err(|e| e.body())?);
    trace
        .root
        .attributes
        .insert("genkit:metadata:agent:sessionId".into(), json!(conn.session_id()));
    s.track(&trace.id, Arc::clone(&conn));
    if let Err(e) = conn.send(input) {
        s.untrack(&trace.id);
        conn.cancel();
        return Err(e.body());
    }
    let mut chunks = conn.receive();
    while let Some(chunk) = chunks.next().await {
        if stream && let Ok(line) = serde_json::to_string(&chunk) {
            let _ = tx.send(Bytes::from(line + "\n"));
        }
    }
    let out = conn.output().await.or_else(holdpoint::Error::into_failed_output);
    if s.untrack(&trace.id).is_none() {
        return Err(ErrorBody {
            status: Status::Cancelled,
            message: "Action was cancelled".into(),
        });
    }
    let out = out.map_err(|e| e.body())?;
    for part in out.interrupts() {
        if let Ok(part) = serde_json::to_value(&part) {
            trace.tool_call(&part, "interrupt");
        }
    }
    serde_json::to_value(&out).map_err(|e| ErrorBody {
        status: Status::Internal,
        message: e.to_string(),
    })
}
