//! Traces of reflection runs in Genkit's shape (`TraceData` of genkit-tools
//! `types/trace.ts`), posted to the CLI's telemetry server
//! (`POST {server}/api/traces`).
//!
//! A turn is one root span (`genkit:type` `action`, subtype `agent`, as
//! Genkit's agent action); each call the turn paused is a child tool span
//! carrying `genkit:metadata:interrupt` (Genkit's `interrupt()` sets it on
//! the tool's span) and each call a resume restarted one carrying
//! `genkit:metadata:resumed`.

use axum::body::Body;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Map, Value, json};

pub(crate) type Http = Client<HttpConnector, Body>;

pub(crate) fn http_client() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Random lowercase hex of `bytes` bytes (trace ids 16, span ids 8).
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if getrandom::fill(&mut buf).is_err() {
        // Ids need only be unique, not secret.
        let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (nanos >> ((i % 8) * 8)) as u8 ^ (i as u8);
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn now_ms() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1000.0
}

/// One span being recorded.
pub(crate) struct Span {
    pub id: String,
    pub parent: Option<String>,
    pub name: String,
    pub start: f64,
    pub end: f64,
    pub attributes: Map<String, Value>,
    pub error: Option<String>,
}

impl Span {
    fn new(name: &str, parent: Option<&str>, path: String, subtype: &str) -> Self {
        let mut attributes = Map::new();
        attributes.insert("genkit:name".into(), json!(name));
        attributes.insert("genkit:type".into(), json!("action"));
        attributes.insert("genkit:metadata:subtype".into(), json!(subtype));
        attributes.insert("genkit:path".into(), json!(path));
        let now = now_ms();
        Span {
            id: random_hex(8),
            parent: parent.map(str::to_owned),
            name: name.to_owned(),
            start: now,
            end: now,
            attributes,
            error: None,
        }
    }

    fn set(&mut self, key: &str, value: Value) {
        self.attributes.insert(key.to_owned(), value);
    }

    fn to_json(&self, trace_id: &str) -> Value {
        let mut attributes = self.attributes.clone();
        let state = if self.error.is_some() { "error" } else { "success" };
        attributes.insert("genkit:state".into(), json!(state));
        let mut span = json!({
            "spanId": self.id,
            "traceId": trace_id,
            "startTime": self.start,
            "endTime": self.end,
            "attributes": attributes,
            "displayName": self.name,
            "instrumentationLibrary": {"name": "genkit-tracer", "version": "v1"},
            "spanKind": "INTERNAL",
            "sameProcessAsParentSpan": {"value": true},
            "status": match &self.error {
                Some(message) => json!({"code": 2, "message": message}),
                None => json!({"code": 0}),
            },
            "timeEvents": {},
        });
        if let Some(parent) = &self.parent {
            span["parentSpanId"] = json!(parent);
        }
        span
    }
}

/// The spans of one run: a root action span and its children.
pub(crate) struct Trace {
    pub id: String,
    pub root: Span,
    children: Vec<Span>,
    root_path: String,
}

impl Trace {
    /// A trace for running the action `name` of `subtype` (`agent`,
    /// `agent-snapshot`, `agent-abort`, `tool`, `model`) under `key` on
    /// `input`.
    pub fn start(name: &str, subtype: &str, key: &str, input: &Value) -> Self {
        let root_path = format!("/{{{name},t:action,s:{subtype}}}");
        let mut root = Span::new(name, None, root_path.clone(), subtype);
        root.set("genkit:isRoot", json!(true));
        root.set("genkit:key", json!(key));
        root.set("genkit:input", json!(input.to_string()));
        Trace {
            id: random_hex(16),
            root,
            children: Vec::new(),
            root_path,
        }
    }

    /// A tool span under the root for the call in `part` (a `toolRequest`
    /// part as JSON), with `key` (`interrupt` or `resumed`) set from the
    /// part's metadata. A paused call is an `error` span, as Genkit's tool
    /// action ends by throwing its interrupt.
    pub fn tool_call(&mut self, part: &Value, key: &str) {
        let Some(request) = part.get("toolRequest") else { return };
        let name = request.get("name").and_then(Value::as_str).unwrap_or("tool");
        let path = format!("{}/{{{name},t:action,s:tool}}", self.root_path);
        let mut span = Span::new(name, Some(&self.root.id), path, "tool");
        span.start = self.root.start;
        // The Dev UI shows the input masked where the hold says so
        // (docs/reference.md §22.1).
        let mut input = request.get("input").cloned().unwrap_or(Value::Null);
        if let Ok(p) = serde_json::from_value::<holdpoint::Part>(part.clone()) {
            holdpoint::review::Redaction::on(&p).mask(&mut input);
        }
        span.set("genkit:input", json!(input.to_string()));
        let meta = part
            .get("metadata")
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or(json!(true));
        span.set(&format!("genkit:metadata:{key}"), json!(meta.to_string()));
        if key == "interrupt" {
            span.error = Some(format!("{name} was interrupted"));
            span.set("genkit:isFailureSource", json!(true));
        }
        span.end = now_ms();
        self.children.push(span);
    }

    /// Ends the root span with `output` (or `error`).
    pub fn finish(&mut self, output: Result<&Value, &str>) {
        self.root.end = now_ms();
        match output {
            Ok(out) => {
                let mut shown = out.clone();
                holdpoint::review::redact_json(&mut shown);
                self.root.set("genkit:output", json!(shown.to_string()));
            }
            Err(message) => self.root.error = Some(message.to_owned()),
        }
    }

    /// `TraceData` as the telemetry server takes it.
    pub fn to_json(&self) -> Value {
        let mut spans = Map::new();
        spans.insert(self.root.id.clone(), self.root.to_json(&self.id));
        for child in &self.children {
            spans.insert(child.id.clone(), child.to_json(&self.id));
        }
        json!({
            "traceId": self.id,
            "displayName": self.root.name,
            "startTime": self.root.start,
            "endTime": self.root.end,
            "spans": spans,
        })
    }
}

/// Posts `trace` to the telemetry server at `base`; a server that cannot
/// be reached loses the trace, never the turn.
pub(crate) async fn post(http: &Http, base: &str, trace: &Trace) {
    let url = format!("{}/api/traces", base.trim_end_matches('/'));
    let Ok(request) = axum::http::Request::post(&url)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(trace.to_json().to_string()))
    else {
        return;
    };
    let send = http.request(request);
    match tokio::time::timeout(std::time::Duration::from_secs(5), send).await {
        Ok(Ok(response)) if response.status().is_success() => {}
        Ok(Ok(response)) => tracing::debug!(status = %response.status(), %url, "the telemetry server refused a trace"),
        Ok(Err(e)) => tracing::debug!(error = %e, %url, "cannot send a trace"),
        Err(_) => tracing::debug!(%url, "the telemetry server did not answer in time"),
    }
}
