//! An interrupted and resumed agent run exported through OpenTelemetry
//! (in-memory exporter): span names, attributes and parent/child links.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::agent::{Agent, AgentInit, AgentInput};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::InMemoryStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Resume, ScriptedModel, ScriptedTurn};
use holdpoint_otel::Otel;
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// Spans by id, to walk parent links.
struct Trace<'a> {
    by_id: HashMap<SpanId, &'a SpanData>,
}

impl<'a> Trace<'a> {
    fn new(spans: &'a [SpanData]) -> Self {
        Self {
            by_id: spans.iter().map(|s| (s.span_context.span_id(), s)).collect(),
        }
    }

    /// The names from `span` up to its root.
    fn path(&self, span: &SpanData) -> Vec<String> {
        let mut names = vec![span.name.to_string()];
        let mut parent = span.parent_span_id;
        while let Some(p) = self.by_id.get(&parent) {
            names.push(p.name.to_string());
            parent = p.parent_span_id;
        }
        names
    }

    /// Whether `ancestor` is a proper ancestor of `span`.
    fn descends(&self, span: &SpanData, ancestor: SpanId) -> bool {
        let mut parent = span.parent_span_id;
        while let Some(p) = self.by_id.get(&parent) {
            if parent == ancestor {
                return true;
            }
            parent = p.parent_span_id;
        }
        false
    }

    fn parent(&self, span: &SpanData) -> Option<&'a SpanData> {
        self.by_id.get(&span.parent_span_id).copied()
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test]
async fn an_interrupted_and_resumed_run_exports_linked_spans() {
    let exporter = InMemorySpanExporter::default();
    let otel = Otel::with_exporter("holdpoint-test", exporter.clone());
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(otel.layer()));

    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let tool = DynamicTool::new(
        "closeAccount",
        "closes an account",
        json!({"type": "object"}),
        move |_ctx: ToolContext, _input| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": true}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::new("m");
    let agent = Agent::builder("gated")
        .model(Arc::new(model.clone()))
        .tools([tool])
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    model.push(ScriptedTurn::text("closed"));

    let held = agent.run_text("close it").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).unwrap();
    let done = agent
        .run(
            AgentInput::resume(Resume::from_parts([hold.approve(None).unwrap()])),
            AgentInit::session(held.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    otel.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let trace = Trace::new(&spans);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    for expected in [
        "agent",
        "turn",
        "generate",
        "model_call",
        "tool_call",
        "resume_decision",
        "store",
    ] {
        assert!(names.contains(&expected), "no {expected} span in {names:?}");
    }

    // Two runs, two traces; each rooted at an `agent` span with the session id.
    let agents = named(&spans, "agent");
    assert_eq!(agents.len(), 2, "{names:?}");
    for a in &agents {
        assert_eq!(a.parent_span_id, SpanId::INVALID, "agent spans are roots");
        assert_eq!(attr(a, "session_id").as_deref(), Some(held.session_id.as_str()));
        assert_eq!(attr(a, "agent").as_deref(), Some("gated"));
    }
    assert_ne!(agents[0].span_context.trace_id(), agents[1].span_context.trace_id());

    // The resume: agent > turn > resume_decision > store(claim_resume), all one trace.
    let decisions = named(&spans, "resume_decision");
    assert_eq!(decisions.len(), 1);
    let decision = decisions[0];
    assert_eq!(attr(decision, "snapshot_id"), held.snapshot_id);
    assert_eq!(trace.path(decision), ["resume_decision", "turn", "agent"]);
    let resume_turn = trace.parent(decision).unwrap();
    let resume_trace: TraceId = resume_turn.span_context.trace_id();
    let claim = spans
        .iter()
        .find(|s| s.name == "store" && attr(s, "op").as_deref() == Some("claim_resume"))
        .expect("a claim span");
    assert_eq!(claim.parent_span_id, decision.span_context.span_id());
    assert_eq!(attr(claim, "snapshot_id"), held.snapshot_id);

    // The tool calls: the held one in the first trace, the approved run in the resume's.
    let calls = named(&spans, "tool_call");
    assert_eq!(calls.len(), 2, "{names:?}");
    let ran: Vec<_> = calls
        .iter()
        .filter(|s| attr(s, "outcome").as_deref() == Some("ok"))
        .collect();
    assert_eq!(ran.len(), 1);
    assert_eq!(attr(ran[0], "tool").as_deref(), Some("closeAccount"));
    assert_eq!(ran[0].span_context.trace_id(), resume_trace);
    assert_eq!(trace.path(ran[0]), ["tool_call", "generate", "turn", "agent"]);
    let held_call = calls
        .iter()
        .find(|s| attr(s, "outcome").as_deref() == Some("interrupted"))
        .unwrap();
    assert_ne!(held_call.span_context.trace_id(), resume_trace);
    assert_eq!(
        attr(held_call, "held_by").as_deref(),
        Some(holdpoint::middleware::TOOL_APPROVAL)
    );
    // Every span below the resume turn shares its trace id.
    let turn_id = resume_turn.span_context.span_id();
    let below: Vec<_> = spans.iter().filter(|s| trace.descends(s, turn_id)).collect();
    assert!(
        below.len() >= 4,
        "resume_decision, store, generate, model_call, tool_call…: {below:?}"
    );
    assert!(below.iter().all(|s| s.span_context.trace_id() == resume_trace));
    // The hold is an event on the first run's agent span.
    let first_agent = agents
        .iter()
        .find(|a| a.span_context.trace_id() == held_call.span_context.trace_id())
        .unwrap();
    assert!(
        first_agent.events.events.iter().any(|e| e.name == "interrupt held"),
        "{:?}",
        first_agent.events.events
    );
}
