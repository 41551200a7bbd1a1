//! The metric families: their label sets, their buckets, and the
//! registry they are registered in once.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Latency buckets for requests, store operations and tool calls (seconds).
const LATENCY: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Buckets for approval waits: a second to a week.
const WAIT: &[f64] = &[
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 86_400.0, 604_800.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY.iter().copied())
}

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT.iter().copied())
}

pub(super) type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latencies<L: Clone + std::hash::Hash + Eq>() -> Histograms<L> {
    Family::new_with_constructor(latency_histogram as fn() -> Histogram)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RequestLabels {
    pub(super) method: &'static str,
    pub(super) route: String,
    pub(super) code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RouteLabels {
    pub(super) method: &'static str,
    pub(super) route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ErrorLabels {
    pub(super) route: String,
    pub(super) code: u16,
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TurnLabels {
    pub(super) agent: String,
    pub(super) finish_reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AgentStatusLabels {
    pub(super) agent: String,
    pub(super) status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AgentLabels {
    pub(super) agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolCallLabels {
    pub(super) tool: String,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolLabels {
    pub(super) tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OpLabels {
    pub(super) op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OpStatusLabels {
    pub(super) op: &'static str,
    pub(super) status: &'static str,
}

/// The metric families, registered once in [`Families::registry`].
pub(super) struct Families {
    pub(super) registry: Registry,
    pub(super) requests: Family<RequestLabels, Counter>,
    pub(super) request_seconds: Histograms<RouteLabels>,
    pub(super) errors: Family<ErrorLabels, Counter>,
    pub(super) turns: Family<TurnLabels, Counter>,
    pub(super) turn_errors: Family<AgentStatusLabels, Counter>,
    pub(super) running: Gauge,
    pub(super) pending: Family<AgentLabels, Gauge>,
    pub(super) pending_oldest: Family<AgentLabels, Gauge<f64, AtomicU64>>,
    pub(super) wait_seconds: Histograms<AgentLabels>,
    pub(super) tool_calls: Family<ToolCallLabels, Counter>,
    pub(super) tool_seconds: Histograms<ToolLabels>,
    pub(super) model_calls: Family<OutcomeLabels, Counter>,
    pub(super) store_seconds: Histograms<OpLabels>,
    pub(super) store_errors: Family<OpStatusLabels, Counter>,
    pub(super) notify: super::notify::NotifyFamilies,
}

impl Families {
    pub(super) fn new() -> Self {
        let mut registry = Registry::default();
        let notify = super::notify::NotifyFamilies::register(&mut registry);
        let mut f = Families {
            registry,
            notify,
            requests: Family::default(),
            request_seconds: latencies(),
            errors: Family::default(),
            turns: Family::default(),
            turn_errors: Family::default(),
            running: Gauge::default(),
            pending: Family::default(),
            pending_oldest: Family::default(),
            wait_seconds: Family::new_with_constructor(wait_histogram as fn() -> Histogram),
            tool_calls: Family::default(),
            tool_seconds: latencies(),
            model_calls: Family::default(),
            store_seconds: latencies(),
            store_errors: Family::default(),
        };
        // Counters are registered without their `_total`, which the
        // encoder appends. The order here is the order of the
        // families in the exposition.
        f.register_http();
        f.register_turns();
        f.register_calls();
        f
    }

    /// Registers the HTTP request families.
    fn register_http(&mut self) {
        let r = &mut self.registry;
        r.register(
            "holdpoint_http_requests",
            "HTTP requests answered, by route and status code",
            self.requests.clone(),
        );
        r.register(
            "holdpoint_http_request_duration_seconds",
            "Time to the response head, by route",
            self.request_seconds.clone(),
        );
        r.register(
            "holdpoint_http_errors",
            "HTTP error responses, by route, code and wire status",
            self.errors.clone(),
        );
    }

    /// Registers the turn and pending-approval families.
    fn register_turns(&mut self) {
        let r = &mut self.registry;
        r.register(
            "holdpoint_turns",
            "Turns run, by agent and finish reason",
            self.turns.clone(),
        );
        r.register(
            "holdpoint_turn_errors",
            "Turns that ended failed, by agent and error status",
            self.turn_errors.clone(),
        );
        r.register("holdpoint_turns_running", "Turns in flight", self.running.clone());
        r.register(
            "holdpoint_pending_approvals",
            "Sessions paused waiting for an answer",
            self.pending.clone(),
        );
        r.register(
            "holdpoint_pending_oldest_seconds",
            "Seconds the oldest paused session has waited",
            self.pending_oldest.clone(),
        );
        r.register(
            "holdpoint_approval_wait_seconds",
            "Seconds from a call being held to its answer",
            self.wait_seconds.clone(),
        );
    }

    /// Registers the tool, model and store call families.
    fn register_calls(&mut self) {
        let r = &mut self.registry;
        r.register(
            "holdpoint_tool_calls",
            "Tool calls, by tool and outcome",
            self.tool_calls.clone(),
        );
        r.register(
            "holdpoint_tool_call_duration_seconds",
            "Tool call duration, by tool",
            self.tool_seconds.clone(),
        );
        r.register(
            "holdpoint_model_calls",
            "Model calls, by outcome",
            self.model_calls.clone(),
        );
        r.register(
            "holdpoint_store_operation_seconds",
            "Session store operation latency, by operation",
            self.store_seconds.clone(),
        );
        r.register(
            "holdpoint_store_errors",
            "Session store operations that failed, by operation and status",
            self.store_errors.clone(),
        );
    }
}
