//! Prometheus metrics, served at `GET /metrics` in the text exposition
//! format (version 0.0.4). Hand-written: no metrics crate, no global
//! registry — each [`Server`](crate::Server) has a [`Metrics`], shared by
//! cloning.
//!
//! | metric | type | labels | from |
//! |---|---|---|---|
//! | `holdpoint_http_requests_total` | counter | `method`, `route`, `code` | every request |
//! | `holdpoint_http_request_duration_seconds` | histogram | `method`, `route` | every request (until the response head; an SSE stream's body is not included) |
//! | `holdpoint_http_errors_total` | counter | `route`, `code`, `status` | responses ≥ 400, `status` the wire status (`NOT_FOUND`, …) |
//! | `holdpoint_turns_total` | counter | `agent`, `finish_reason` | every turn the server ran (JSON, SSE, WebSocket) |
//! | `holdpoint_turn_errors_total` | counter | `agent`, `status` | turns that ended `failed` (still HTTP 200), by their error's status |
//! | `holdpoint_turns_running` | gauge | | turns in flight |
//! | `holdpoint_pending_approvals` | gauge | `agent` | paused calls waiting for an answer (listed at scrape time, at most 100 000 per agent) |
//! | `holdpoint_pending_oldest_seconds` | gauge | `agent` | how long the oldest of them has waited |
//! | `holdpoint_approval_wait_seconds` | histogram | `agent` | held → answered, for resumes the server ran (from the paused snapshot's time) |
//! | `holdpoint_tool_calls_total` | counter | `tool`, `outcome` | with [`Metrics::middleware`] installed: `output`, `interrupt`, `failed`, `error` |
//! | `holdpoint_tool_call_duration_seconds` | histogram | `tool` | with [`Metrics::middleware`] |
//! | `holdpoint_model_calls_total` | counter | `outcome` | with [`Metrics::middleware`]: `ok`, `error` |
//! | `holdpoint_store_operation_seconds` | histogram | `op` | with [`Metrics::store`] wrapping the agents' store |
//! | `holdpoint_store_errors_total` | counter | `op`, `status` | with [`Metrics::store`] |
//!
//! Tool calls and store latency come from inside the agent, which the
//! server does not build: install them when building the agents.
//!
//! ```
//! use std::sync::Arc;
//! use holdpoint::agent::Agent;
//! use holdpoint::session::InMemoryStore;
//! use holdpoint::{ScriptedModel, ScriptedTurn};
//! use holdpoint_server::{Metrics, Server};
//!
//! let metrics = Metrics::new();
//! let model = ScriptedModel::new("m");
//! model.push(ScriptedTurn::text("hello"));
//! let agent = Agent::builder("greeter")
//!     .model(Arc::new(model))
//!     .middleware(metrics.middleware())
//!     .store(metrics.store(Arc::new(InMemoryStore::new())))
//!     .build()?;
//! let server = Server::builder()
//!     .agent(agent)
//!     .metrics(metrics.clone())
//!     .signing_keys(holdpoint_server::signing::KeyRing::ephemeral()?)
//!     .build()?;
//! assert!(metrics.render().contains("# TYPE holdpoint_turns_total counter"));
//! # let _ = server;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The counts are aggregates labelled by agent, tool and route names only —
//! no session ids, principals or inputs. Set
//! [`ServerBuilder::metrics_token`](crate::ServerBuilder::metrics_token) to
//! require `Authorization: Bearer TOKEN` for the scrape.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use holdpoint::agent::AgentOutput;
use holdpoint::middleware::{Middleware, ModelNext, ToolHookCall, ToolNext};
use holdpoint::model::{GenerateRequest, GenerateResponse};
use holdpoint::session::{
    AuditQuery, AuditRecord, ResumeClaim, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus, SnapshotUpdate,
};
use holdpoint::tool::ToolOutcome;
use holdpoint::{FinishReason, Status};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::state::AppState;

/// Latency buckets for requests, store operations and tool calls (seconds).
const LATENCY: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Buckets for approval waits: a second to a week.
const WAIT: &[f64] = &[
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 86_400.0, 604_800.0,
];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram(&'static [f64]),
}

struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

const REQUESTS: &str = "holdpoint_http_requests_total";
const REQUEST_SECONDS: &str = "holdpoint_http_request_duration_seconds";
const ERRORS: &str = "holdpoint_http_errors_total";
const TURNS: &str = "holdpoint_turns_total";
const TURN_ERRORS: &str = "holdpoint_turn_errors_total";
const RUNNING: &str = "holdpoint_turns_running";
const PENDING: &str = "holdpoint_pending_approvals";
const PENDING_OLDEST: &str = "holdpoint_pending_oldest_seconds";
const WAIT_SECONDS: &str = "holdpoint_approval_wait_seconds";
const TOOL_CALLS: &str = "holdpoint_tool_calls_total";
const TOOL_SECONDS: &str = "holdpoint_tool_call_duration_seconds";
const MODEL_CALLS: &str = "holdpoint_model_calls_total";
const STORE_SECONDS: &str = "holdpoint_store_operation_seconds";
const STORE_ERRORS: &str = "holdpoint_store_errors_total";

const FAMILIES: &[Family] = &[
    Family {
        name: REQUESTS,
        kind: Kind::Counter,
        help: "HTTP requests answered, by route and status code.",
    },
    Family {
        name: REQUEST_SECONDS,
        kind: Kind::Histogram(LATENCY),
        help: "Time to the response head, by route.",
    },
    Family {
        name: ERRORS,
        kind: Kind::Counter,
        help: "HTTP error responses, by route, code and wire status.",
    },
    Family {
        name: TURNS,
        kind: Kind::Counter,
        help: "Turns run, by agent and finish reason.",
    },
    Family {
        name: TURN_ERRORS,
        kind: Kind::Counter,
        help: "Turns that ended failed, by agent and error status.",
    },
    Family {
        name: RUNNING,
        kind: Kind::Gauge,
        help: "Turns in flight.",
    },
    Family {
        name: PENDING,
        kind: Kind::Gauge,
        help: "Paused calls waiting for an answer.",
    },
    Family {
        name: PENDING_OLDEST,
        kind: Kind::Gauge,
        help: "Seconds the oldest paused call has waited.",
    },
    Family {
        name: WAIT_SECONDS,
        kind: Kind::Histogram(WAIT),
        help: "Seconds from a call being held to its answer.",
    },
    Family {
        name: TOOL_CALLS,
        kind: Kind::Counter,
        help: "Tool calls, by tool and outcome.",
    },
    Family {
        name: TOOL_SECONDS,
        kind: Kind::Histogram(LATENCY),
        help: "Tool call duration, by tool.",
    },
    Family {
        name: MODEL_CALLS,
        kind: Kind::Counter,
        help: "Model calls, by outcome.",
    },
    Family {
        name: STORE_SECONDS,
        kind: Kind::Histogram(LATENCY),
        help: "Session store operation latency, by operation.",
    },
    Family {
        name: STORE_ERRORS,
        kind: Kind::Counter,
        help: "Session store operations that failed, by operation and status.",
    },
];

type Labels = Vec<(&'static str, String)>;

#[derive(Default, Clone)]
struct Hist {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Registry {
    values: Mutex<BTreeMap<(&'static str, Labels), f64>>,
    hists: Mutex<BTreeMap<(&'static str, Labels), Hist>>,
}

/// The server's metrics (cheap to clone; clones share the counts).
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Arc<Registry>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn buckets_of(name: &str) -> &'static [f64] {
    FAMILIES
        .iter()
        .find(|f| f.name == name)
        .and_then(|f| match f.kind {
            Kind::Histogram(b) => Some(b),
            _ => None,
        })
        .unwrap_or(LATENCY)
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn label_text(labels: &[(&'static str, String)], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{}\"", escape(v)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, name: &'static str, labels: Labels, by: f64) {
        let mut values = self.inner.values.lock().unwrap_or_else(|e| e.into_inner());
        *values.entry((name, labels)).or_insert(0.0) += by;
    }

    fn set(&self, name: &'static str, labels: Labels, to: f64) {
        let mut values = self.inner.values.lock().unwrap_or_else(|e| e.into_inner());
        values.insert((name, labels), to);
    }

    fn observe(&self, name: &'static str, labels: Labels, value: f64) {
        let buckets = buckets_of(name);
        let mut hists = self.inner.hists.lock().unwrap_or_else(|e| e.into_inner());
        let h = hists.entry((name, labels)).or_insert_with(|| Hist {
            counts: vec![0; buckets.len()],
            ..Hist::default()
        });
        for (i, upper) in buckets.iter().enumerate() {
            if value <= *upper {
                h.counts[i] += 1;
            }
        }
        h.sum += value;
        h.count += 1;
    }

    /// A counter's or gauge's current value (0 when never set), for tests
    /// and health checks.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let values = self.inner.values.lock().unwrap_or_else(|e| e.into_inner());
        values
            .iter()
            .filter(|((n, l), _)| *n == name && labels.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v)))
            .map(|(_, v)| v)
            .sum()
    }

    /// How many observations a histogram holds whose labels include
    /// `labels`.
    pub fn observations(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let hists = self.inner.hists.lock().unwrap_or_else(|e| e.into_inner());
        hists
            .iter()
            .filter(|((n, l), _)| *n == name && labels.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v)))
            .map(|(_, h)| h.count)
            .sum()
    }

    /// The text exposition of everything recorded so far.
    pub fn render(&self) -> String {
        let values = self.inner.values.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let hists = self.inner.hists.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out = String::new();
        for family in FAMILIES {
            let kind = match family.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram(_) => "histogram",
            };
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} {kind}", family.name);
            match family.kind {
                Kind::Histogram(buckets) => {
                    for ((_, labels), h) in hists.iter().filter(|((n, _), _)| *n == family.name) {
                        for (upper, count) in buckets.iter().zip(&h.counts) {
                            let le = number(*upper);
                            let _ = writeln!(
                                out,
                                "{}_bucket{} {count}",
                                family.name,
                                label_text(labels, Some(("le", &le)))
                            );
                        }
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {}",
                            family.name,
                            label_text(labels, Some(("le", "+Inf"))),
                            h.count
                        );
                        let _ = writeln!(out, "{}_sum{} {}", family.name, label_text(labels, None), number(h.sum));
                        let _ = writeln!(out, "{}_count{} {}", family.name, label_text(labels, None), h.count);
                    }
                }
                Kind::Counter | Kind::Gauge => {
                    for ((_, labels), v) in values.iter().filter(|((n, _), _)| *n == family.name) {
                        let _ = writeln!(out, "{}{} {}", family.name, label_text(labels, None), number(*v));
                    }
                }
            }
        }
        out
    }

    /// A middleware that counts and times tool calls (by tool and outcome)
    /// and model calls. Add it to each agent whose calls should be counted
    /// (outermost, so it sees holds raised by the stages inside it).
    pub fn middleware(&self) -> Arc<dyn Middleware> {
        Arc::new(CountingMiddleware { metrics: self.clone() })
    }

    /// `store`, timed: every operation's latency and failures are recorded.
    /// Give the wrapped store to the agents.
    pub fn store(&self, store: Arc<dyn SessionStore>) -> Arc<dyn SessionStore> {
        Arc::new(TimedStore {
            inner: store,
            metrics: self.clone(),
        })
    }

    pub(crate) fn request(&self, method: &str, route: &str, code: StatusCode, status: Option<Status>, took: Duration) {
        let code_text = code.as_u16().to_string();
        self.add(
            REQUESTS,
            vec![
                ("method", method.to_owned()),
                ("route", route.to_owned()),
                ("code", code_text.clone()),
            ],
            1.0,
        );
        self.observe(
            REQUEST_SECONDS,
            vec![("method", method.to_owned()), ("route", route.to_owned())],
            took.as_secs_f64(),
        );
        if code.as_u16() >= 400 {
            let status = status.map_or("UNKNOWN", |s| s.as_str());
            self.add(
                ERRORS,
                vec![
                    ("route", route.to_owned()),
                    ("code", code_text),
                    ("status", status.to_owned()),
                ],
                1.0,
            );
        }
    }

    /// Records a finished turn.
    pub(crate) fn turn(&self, agent: &str, finish_reason: FinishReason, error: Option<Status>) {
        self.add(
            TURNS,
            vec![
                ("agent", agent.to_owned()),
                ("finish_reason", finish_reason.as_str().to_owned()),
            ],
            1.0,
        );
        if finish_reason == FinishReason::Failed {
            let status = error.map_or("UNKNOWN", |s| s.as_str());
            self.add(
                TURN_ERRORS,
                vec![("agent", agent.to_owned()), ("status", status.to_owned())],
                1.0,
            );
        }
    }

    /// Records a turn's output (or the error that stopped it), and for a
    /// resume that went through, how long the call waited.
    pub(crate) fn output(&self, meta: &TurnMeta, out: &Result<AgentOutput, holdpoint::Error>) {
        match out {
            Ok(o) => {
                self.turn(&meta.agent, o.finish_reason, o.error.as_ref().map(|e| e.status));
                if o.finish_reason != FinishReason::Failed {
                    self.answered(meta);
                }
            }
            Err(e) => self.turn(&meta.agent, FinishReason::Failed, Some(e.status())),
        }
    }

    /// Records the wait of a resume that went through.
    pub(crate) fn answered(&self, meta: &TurnMeta) {
        if let Some(since) = meta.held_since {
            let waited = (chrono::Utc::now() - since).num_milliseconds().max(0) as f64 / 1000.0;
            self.observe(WAIT_SECONDS, vec![("agent", meta.agent.clone())], waited);
        }
    }

    fn store_op(&self, op: &'static str, took: Duration, error: Option<&holdpoint::Error>) {
        self.observe(STORE_SECONDS, vec![("op", op.to_owned())], took.as_secs_f64());
        if let Some(e) = error {
            self.add(
                STORE_ERRORS,
                vec![("op", op.to_owned()), ("status", e.status().as_str().to_owned())],
                1.0,
            );
        }
    }
}

/// What the metrics need to know about a turn the server runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnMeta {
    pub agent: String,
    /// For a resume of a stored session: when the answered snapshot was
    /// written (the call has been held since).
    pub held_since: Option<chrono::DateTime<chrono::Utc>>,
}

/// The wire status of an error response, for the metrics layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorStatus(pub Status);

/// Records every request: count, latency, errors.
pub(crate) async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let status = response.extensions().get::<ErrorStatus>().map(|s| s.0);
    state
        .metrics()
        .request(&method, &route, response.status(), status, started.elapsed());
    response
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    if let Some(token) = state.metrics_token() {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given.is_none_or(|g| Sha256::digest(g.as_bytes()) != Sha256::digest(token.as_bytes())) {
            return ApiError::unauthenticated("the metrics need their bearer token").into_response();
        }
    }
    let metrics = state.metrics();
    metrics.set(RUNNING, Vec::new(), state.turns().running() as f64);
    let now = chrono::Utc::now();
    for agent in state.agents().values().filter(|a| a.is_server_managed()) {
        let query = SnapshotQuery {
            limit: Some(100_000),
            ..SnapshotQuery::default()
        };
        match agent.pending(query).await {
            Ok(items) => {
                let oldest = items.iter().map(|p| p.held_since).min();
                let labels = vec![("agent", agent.name().to_owned())];
                metrics.set(PENDING, labels.clone(), items.len() as f64);
                let age = oldest.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
                metrics.set(PENDING_OLDEST, labels, age);
            }
            Err(e) => tracing::warn!(agent = agent.name(), error = %e, "metrics: could not list pending calls"),
        }
    }
    let mut response = (StatusCode::OK, metrics.render()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

struct CountingMiddleware {
    metrics: Metrics,
}

#[async_trait]
impl Middleware for CountingMiddleware {
    fn name(&self) -> &str {
        "metrics"
    }

    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> holdpoint::Result<GenerateResponse> {
        let out = next.run(request).await;
        let outcome = if out.is_ok() { "ok" } else { "error" };
        self.metrics
            .add(MODEL_CALLS, vec![("outcome", outcome.to_owned())], 1.0);
        out
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> holdpoint::Result<ToolOutcome> {
        let tool = call.name.clone();
        let started = Instant::now();
        let out = next.run(call).await;
        let outcome = match &out {
            Ok(ToolOutcome::Output { .. }) => "output",
            Ok(ToolOutcome::Interrupt(_)) => "interrupt",
            Ok(ToolOutcome::Failed(_)) => "failed",
            Err(_) => "error",
        };
        self.metrics.observe(
            TOOL_SECONDS,
            vec![("tool", tool.clone())],
            started.elapsed().as_secs_f64(),
        );
        self.metrics
            .add(TOOL_CALLS, vec![("tool", tool), ("outcome", outcome.to_owned())], 1.0);
        out
    }
}

/// A store that times every operation of the store it wraps.
struct TimedStore {
    inner: Arc<dyn SessionStore>,
    metrics: Metrics,
}

impl TimedStore {
    async fn timed<T>(
        &self,
        op: &'static str,
        f: impl std::future::Future<Output = holdpoint::Result<T>>,
    ) -> holdpoint::Result<T> {
        let started = Instant::now();
        let out = f.await;
        self.metrics.store_op(op, started.elapsed(), out.as_ref().err());
        out
    }
}

#[async_trait]
impl SessionStore for TimedStore {
    async fn get_snapshot(&self, snapshot_id: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("get_snapshot", self.inner.get_snapshot(snapshot_id)).await
    }

    async fn get_latest_snapshot(&self, session_id: &str) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("get_latest_snapshot", self.inner.get_latest_snapshot(session_id))
            .await
    }

    async fn save_snapshot(
        &self,
        snapshot_id: Option<&str>,
        update: SnapshotUpdate,
    ) -> holdpoint::Result<Option<Snapshot>> {
        self.timed("save_snapshot", self.inner.save_snapshot(snapshot_id, update))
            .await
    }

    async fn watch_status(&self, snapshot_id: &str) -> holdpoint::Result<BoxStream<'static, SnapshotStatus>> {
        self.timed("watch_status", self.inner.watch_status(snapshot_id)).await
    }

    async fn list_snapshots(&self, query: &SnapshotQuery) -> holdpoint::Result<Vec<Snapshot>> {
        self.timed("list_snapshots", self.inner.list_snapshots(query)).await
    }

    async fn append_audit(&self, records: Vec<AuditRecord>) -> holdpoint::Result<()> {
        self.timed("append_audit", self.inner.append_audit(records)).await
    }

    async fn list_audit(&self, query: &AuditQuery) -> holdpoint::Result<Vec<AuditRecord>> {
        self.timed("list_audit", self.inner.list_audit(query)).await
    }

    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> holdpoint::Result<()> {
        self.timed("claim_resume", self.inner.claim_resume(claim, audit)).await
    }

    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> holdpoint::Result<Snapshot> {
        self.timed("insert_snapshot", self.inner.insert_snapshot(snapshot_id, row))
            .await
    }

    async fn abort(&self, snapshot_id: &str) -> holdpoint::Result<Option<SnapshotStatus>> {
        self.timed("abort", self.inner.abort(snapshot_id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_text_format() {
        let m = Metrics::new();
        m.turn("bank", FinishReason::Interrupted, None);
        m.turn("bank", FinishReason::Failed, Some(Status::Unavailable));
        m.request(
            "POST",
            "/agents/{name}",
            StatusCode::NOT_FOUND,
            Some(Status::NotFound),
            Duration::from_millis(3),
        );
        m.store_op("get_snapshot", Duration::from_micros(700), None);
        let text = m.render();
        assert!(
            text.contains("holdpoint_turns_total{agent=\"bank\",finish_reason=\"interrupted\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("holdpoint_turn_errors_total{agent=\"bank\",status=\"UNAVAILABLE\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "holdpoint_http_errors_total{route=\"/agents/{name}\",code=\"404\",status=\"NOT_FOUND\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("holdpoint_http_request_duration_seconds_bucket{method=\"POST\",route=\"/agents/{name}\",le=\"0.005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("holdpoint_http_request_duration_seconds_bucket{method=\"POST\",route=\"/agents/{name}\",le=\"0.0025\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("holdpoint_store_operation_seconds_count{op=\"get_snapshot\"} 1\n"),
            "{text}"
        );
        // Every sample line is NAME{labels} VALUE; HELP and TYPE come first.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "{line}");
        }
        assert_eq!(m.value(TURNS, &[("agent", "bank")]), 2.0);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(3.0), "3");
    }
}
