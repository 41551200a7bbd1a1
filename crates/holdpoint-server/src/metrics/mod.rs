//! Prometheus metrics, served at `GET /metrics` in the text exposition
//! format (version 0.0.4), kept in a [`prometheus_client`] registry of the
//! server's own (no global registry): each [`Server`](crate::Server) has a
//! [`Metrics`], shared by cloning.
//!
//! | metric | type | labels | from |
//! |---|---|---|---|
//! | `holdpoint_http_requests_total` | counter | `method`, `route`, `code` | every request |
//! | `holdpoint_http_request_duration_seconds` | histogram | `method`, `route` | every request (until the response head; an SSE stream's body is not included) |
//! | `holdpoint_http_errors_total` | counter | `route`, `code`, `status` | responses ≥ 400, `status` the wire status (`NOT_FOUND`, …) |
//! | `holdpoint_turns_total` | counter | `agent`, `finish_reason` | every turn the server ran (JSON, SSE, WebSocket) |
//! | `holdpoint_turn_errors_total` | counter | `agent`, `status` | turns that ended `failed` (still HTTP 200), by their error's status |
//! | `holdpoint_turns_running` | gauge | | turns in flight |
//! | `holdpoint_pending_approvals` | gauge | `agent` | sessions paused waiting for an answer (counted by the store at scrape time, [`SnapshotListing::count_waiting`](holdpoint::session::SnapshotListing::count_waiting)) |
//! | `holdpoint_pending_oldest_seconds` | gauge | `agent` | how long the oldest of them has waited |
//! | `holdpoint_approval_wait_seconds` | histogram | `agent` | held → answered, for resumes the server ran (from the paused snapshot's time) |
//! | `holdpoint_tool_calls_total` | counter | `tool`, `outcome` | with [`Metrics::middleware`] installed: `output`, `interrupt`, `failed`, `error` |
//! | `holdpoint_tool_call_duration_seconds` | histogram | `tool` | with [`Metrics::middleware`] |
//! | `holdpoint_model_calls_total` | counter | `outcome` | with [`Metrics::middleware`]: `ok`, `error` |
//! | `holdpoint_store_operation_seconds` | histogram | `op` | with [`Metrics::store`] wrapping the agents' store |
//! | `holdpoint_store_errors_total` | counter | `op`, `status` | with [`Metrics::store`] |
//! | `holdpoint_notify_*` | counters, gauges, a histogram | `channel`, `type` | the notification pipe: deliveries, failures, dead letters, queue age (see `notify`), with [`ServerBuilder::notifications`](crate::ServerBuilder::notifications) and the worker's observer |
//!
//! Every label value comes from a small fixed set, whatever a request
//! says, so no client can grow the scrape: `method` is one of the nine
//! standard methods or `other`; `route` is the matched route template
//! (`/agents/{name}`) or `unmatched`; `agent` is the name of an agent the
//! server serves (a request for another is a 404 before any turn runs);
//! `tool` is the name of a tool the agent has (a call to any other fails
//! before the middleware sees it); `code` is the response's status code and
//! `status`, `finish_reason`, `outcome` and `op` are fixed words.
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
//! // The served agents' series start at zero; the others appear with
//! // their first sample.
//! assert!(metrics.render().contains("holdpoint_pending_approvals{agent=\"greeter\"} 0"));
//! # let _ = server;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The counts are aggregates labelled by agent, tool and route names only —
//! no session ids, principals or inputs. Who may scrape them:
//! [`ServerBuilder::metrics_token`](crate::ServerBuilder::metrics_token) and
//! [`ServerBuilder::metrics_open`](crate::ServerBuilder::metrics_open).

mod http;
mod middleware;
mod notify;
mod registry;
mod store;

use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::AgentOutput;
use holdpoint::middleware::Middleware;
use holdpoint::session::SessionStore;
use holdpoint::{FinishReason, Status};

pub(crate) use http::layer;
use registry::{
    AgentLabels, AgentStatusLabels, ErrorLabels, Families, OpLabels, OpStatusLabels, OutcomeLabels, RequestLabels,
    RouteLabels, ToolCallLabels, ToolLabels, TurnLabels,
};

/// The server's metrics (cheap to clone; clones share the counts).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Families>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            inner: Arc::new(Families::new()),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The samples of `text` (an exposition) named `name` whose labels include
/// `labels`, summed.
fn sum_samples(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            let matches = n == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            matches.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter's or gauge's current value summed over the series whose
    /// labels include `labels` (0 when none), for tests and health checks.
    /// `name` is the exposed name (`holdpoint_turns_total`).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        sum_samples(&self.render(), name, labels)
    }

    /// How many observations a histogram holds whose labels include
    /// `labels`.
    pub fn observations(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let count = sum_samples(&self.render(), &format!("{name}_count"), labels);
        if count.is_finite() && count > 0.0 {
            count as u64
        } else {
            0
        }
    }

    /// The text exposition (version 0.0.4) of everything recorded so far.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry) {
            tracing::warn!(error = %e, "metrics: could not encode the registry");
        }
        out
    }

    /// A middleware that counts and times tool calls (by tool and outcome)
    /// and model calls. Add it to each agent whose calls should be counted
    /// (outermost, so it sees holds raised by the stages inside it).
    pub fn middleware(&self) -> Arc<dyn Middleware> {
        Arc::new(middleware::CountingMiddleware::new(self.clone()))
    }

    /// `store`, timed: every operation's latency and failures are recorded,
    /// those of each capability it has included (it has the same ones).
    /// Give the wrapped store to the agents.
    pub fn store(&self, store: Arc<dyn SessionStore>) -> Arc<dyn SessionStore> {
        let timer = Arc::new(store::StoreTimer::new(self.clone()));
        Arc::new(holdpoint::session::observe(store, timer))
    }

    /// Records one answered request. `method` and `route` must already be
    /// one of the fixed label values (see [`http::method_label`]).
    fn request(
        &self,
        method: &'static str,
        route: &str,
        code: axum::http::StatusCode,
        status: Option<Status>,
        took: Duration,
    ) {
        let code = code.as_u16();
        self.inner
            .requests
            .get_or_create(&RequestLabels {
                method,
                route: route.to_owned(),
                code,
            })
            .inc();
        self.inner
            .request_seconds
            .get_or_create(&RouteLabels {
                method,
                route: route.to_owned(),
            })
            .observe(took.as_secs_f64());
        if code >= 400 {
            let status = status.map_or("UNKNOWN", |s| s.as_str());
            self.inner
                .errors
                .get_or_create(&ErrorLabels {
                    route: route.to_owned(),
                    code,
                    status,
                })
                .inc();
        }
    }

    /// Records a finished turn of the served agent `agent`.
    pub(crate) fn turn(&self, agent: &str, finish_reason: FinishReason, error: Option<Status>) {
        self.inner
            .turns
            .get_or_create(&TurnLabels {
                agent: agent.to_owned(),
                finish_reason: finish_reason.as_str(),
            })
            .inc();
        if finish_reason == FinishReason::Failed {
            let status = error.map_or("UNKNOWN", |s| s.as_str());
            self.inner
                .turn_errors
                .get_or_create(&AgentStatusLabels {
                    agent: agent.to_owned(),
                    status,
                })
                .inc();
        }
    }

    /// Records a turn's output (or the error that stopped it), and for a
    /// resume that went through, how long the call waited.
    pub(crate) fn output(&self, meta: &TurnMeta, out: &Result<AgentOutput, holdpoint::Error>) {
        match out {
            Ok(o) => {
                self.turn(&meta.agent, o.finish_reason, o.error.as_ref().map(|e| e.status));
                if o.finish_reason != FinishReason::Failed {
                    self.answered(meta, o.held_for);
                }
            }
            Err(e) => self.turn(&meta.agent, FinishReason::Failed, Some(e.status())),
        }
    }

    /// Records the wait of a resume that went through (`held_for`, the
    /// answered holds' age the output reports).
    pub(crate) fn answered(&self, meta: &TurnMeta, held_for: Option<std::time::Duration>) {
        if let Some(held) = held_for {
            let waited = held.as_secs_f64();
            self.inner
                .wait_seconds
                .get_or_create(&AgentLabels {
                    agent: meta.agent.clone(),
                })
                .observe(waited);
        }
    }

    /// Starts the per-agent series of `agent`, which the server serves, at
    /// zero: a scrape lists them before the first turn.
    pub(crate) fn serve_agent(&self, agent: &str) {
        let labels = AgentLabels {
            agent: agent.to_owned(),
        };
        let _ = self.inner.wait_seconds.get_or_create(&labels);
        let _ = self.inner.pending.get_or_create(&labels);
        let _ = self.inner.pending_oldest.get_or_create(&labels);
    }

    /// Sets the gauges of the served agent `agent`'s waiting sessions.
    pub(crate) fn waiting(&self, agent: &str, count: u64, oldest_seconds: f64) {
        let labels = AgentLabels {
            agent: agent.to_owned(),
        };
        self.inner
            .pending
            .get_or_create(&labels)
            .set(i64::try_from(count).unwrap_or(i64::MAX));
        self.inner.pending_oldest.get_or_create(&labels).set(oldest_seconds);
    }

    /// Sets the gauge of the turns in flight.
    pub(crate) fn running(&self, turns: usize) {
        self.inner.running.set(i64::try_from(turns).unwrap_or(i64::MAX));
    }

    fn model_call(&self, outcome: &'static str) {
        self.inner.model_calls.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    fn tool_call(&self, tool: &str, outcome: &'static str, took: Duration) {
        self.inner
            .tool_seconds
            .get_or_create(&ToolLabels { tool: tool.to_owned() })
            .observe(took.as_secs_f64());
        self.inner
            .tool_calls
            .get_or_create(&ToolCallLabels {
                tool: tool.to_owned(),
                outcome,
            })
            .inc();
    }

    fn store_op(&self, op: &'static str, took: Duration, error: Option<&holdpoint::Error>) {
        self.inner
            .store_seconds
            .get_or_create(&OpLabels { op })
            .observe(took.as_secs_f64());
        if let Some(e) = error {
            self.inner
                .store_errors
                .get_or_create(&OpStatusLabels {
                    op,
                    status: e.status().as_str(),
                })
                .inc();
        }
    }
}

/// What the metrics need to know about a turn the server runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnMeta {
    /// The name of the served agent that runs it.
    pub agent: String,
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

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
        for expected in [
            "# TYPE holdpoint_turns_total counter\n",
            "# TYPE holdpoint_http_request_duration_seconds histogram\n",
            "holdpoint_turns_total{agent=\"bank\",finish_reason=\"interrupted\"} 1\n",
            "holdpoint_turn_errors_total{agent=\"bank\",status=\"UNAVAILABLE\"} 1\n",
            "holdpoint_http_errors_total{route=\"/agents/{name}\",code=\"404\",status=\"NOT_FOUND\"} 1\n",
            "holdpoint_http_request_duration_seconds_bucket{method=\"POST\",route=\"/agents/{name}\",le=\"0.005\"} 1\n",
            "holdpoint_http_request_duration_seconds_bucket{method=\"POST\",route=\"/agents/{name}\",le=\"0.0025\"} 0\n",
            "holdpoint_store_operation_seconds_count{op=\"get_snapshot\"} 1\n",
        ] {
            assert!(text.contains(expected), "{expected}\nin\n{text}");
        }
        // Every sample line is NAME{labels} VALUE; HELP and TYPE come first.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "{line}");
        }
        assert_eq!(m.value("holdpoint_turns_total", &[("agent", "bank")]), 2.0);
        assert_eq!(
            m.observations("holdpoint_store_operation_seconds", &[("op", "get_snapshot")]),
            1
        );
    }
}
