//! The reflection API's routes (the wire of Genkit's `js/core/src/reflection.ts`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use holdpoint::Status;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::actions;
use super::guard::{self, error};
use super::run::{self, RunRequest, Sink};
use super::trace::{self, Trace};
use super::{REFLECTION_API_SPEC_VERSION, Shared};

/// The routes, behind the guards of the `guard` module: the `Host` and
/// `Origin` check runs first (the outer layer), then the JSON check of
/// `POST` bodies, so no handler sees a request either refuses.
pub(crate) fn router(shared: Shared) -> Router {
    let routes = Router::new()
        .route("/api/__health", get(health))
        .route("/api/actions", get(actions))
        .route("/api/envs", get(|| async { Json(json!(["dev"])) }))
        .route("/api/runAction", post(run_action))
        .route("/api/notify", post(notify))
        .route("/api/cancelAction", post(cancel_action))
        .layer(axum::middleware::from_fn(guard::require_json))
        .with_state(shared);
    // The reflection server answers its loopback names and addresses only
    // (it listens on `127.0.0.1`), whatever the main server allows.
    holdpoint_server::hosts::loopback_only(routes)
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
    // Checked before anything changes: a refused notify changes nothing.
    if let Some(url) = &body.telemetry_server_url
        && let Err(why) = guard::check_telemetry_url(url)
    {
        return error(StatusCode::BAD_REQUEST, Status::InvalidArgument, why);
    }
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
        Some(running) => {
            running.cancel();
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

async fn actions(State(s): State<Shared>) -> Json<Value> {
    Json(Value::Object(actions::list(&s)))
}

async fn run_action(State(s): State<Shared>, Query(q): Query<RunQuery>, body: Bytes) -> Response {
    let req: RunRequest = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                Status::InvalidArgument,
                format!("expected {{\"key\", \"input\"}}: {e}"),
            );
        }
    };
    let Some(target) = actions::target(&s, &req.key) else {
        return error(
            StatusCode::NOT_FOUND,
            Status::NotFound,
            format!("action {} not found", req.key),
        );
    };
    let stream = q.stream.as_deref() == Some("true");
    let (name, subtype) = target.name_and_type();
    let mut trace = Trace::start(&name, subtype, &req.key, &req.input);
    let trace_id = trace.id.clone();
    let span_id = trace.root.id.clone();
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let sink: Option<Sink> = stream.then(|| {
        let tx = tx.clone();
        Arc::new(move |chunk: Value| {
            let _ = tx.send(Bytes::from(chunk.to_string() + "\n"));
        }) as Sink
    });
    let worker = s.clone();
    tokio::spawn(async move {
        let result = run::execute(&worker, target, req, &mut trace, sink, None).await;
        let frame = match &result {
            Ok(out) => {
                trace.finish(Ok(out));
                json!({"result": out, "telemetry": {"traceId": trace.id}})
            }
            Err(f) => {
                trace.finish(Err(&f.body.message));
                json!({"error": run::status_object(f, &trace.id)})
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
