//! Tracing spans: store operations of a resume, and the spans of an
//! approved call (a small in-test layer records spans and events).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::middleware::{TOOL_APPROVAL, ToolApproval};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{FinishReason, Part, Resume, ScriptedModel, ScriptedTurn, Status};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::{approve, bank};

/// One recorded span: its name, fields, and the index of its parent.
#[derive(Debug, Clone)]
pub struct SpanRec {
    pub name: String,
    pub fields: BTreeMap<String, String>,
    pub parent: Option<usize>,
}

/// One recorded event: its fields (`message` included) and its span.
#[derive(Debug, Clone)]
pub struct EventRec {
    pub fields: BTreeMap<String, String>,
    pub span: Option<usize>,
}

#[derive(Default)]
struct Log {
    spans: Vec<SpanRec>,
    events: Vec<EventRec>,
}

/// Records every span and event, in order.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Log>>);

/// The index of a span in the log, kept in the span's extensions (the
/// registry reuses span ids).
struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut log = self.0.lock().unwrap();
        log.spans.push(SpanRec {
            name: attrs.metadata().name().to_owned(),
            fields,
            parent,
        });
        span.extensions_mut().insert(Index(log.spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(index) = ctx.span(id).and_then(|s| s.extensions().get::<Index>().map(|i| i.0)) else {
            return;
        };
        let mut log = self.0.lock().unwrap();
        values.record(&mut Fields(&mut log.spans[index].fields));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let span = ctx
            .event_span(event)
            .and_then(|s| s.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().events.push(EventRec { fields, span });
    }
}

impl Capture {
    /// Installs a subscriber with this layer for the current thread.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    pub fn spans(&self) -> Vec<SpanRec> {
        self.0.lock().unwrap().spans.clone()
    }

    pub fn events(&self) -> Vec<EventRec> {
        self.0.lock().unwrap().events.clone()
    }

    /// Indexes of spans named `name` whose fields include every `(key, value)`.
    pub fn find(&self, name: &str, with: &[(&str, &str)]) -> Vec<usize> {
        self.spans()
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.name == name
                    && with
                        .iter()
                        .all(|(k, v)| s.fields.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether span `index` is `ancestor` or lies below it.
    pub fn within(&self, index: usize, ancestor: usize) -> bool {
        let spans = self.spans();
        let mut at = Some(index);
        while let Some(i) = at {
            if i == ancestor {
                return true;
            }
            at = spans[i].parent;
        }
        false
    }
}

fn resume(parts: Vec<Part>) -> AgentInput {
    AgentInput::resume(Resume::from_parts(parts))
}

#[tokio::test]
async fn a_resume_records_store_spans_for_the_claim_and_the_save() {
    let capture = Capture::default();
    let _guard = capture.install();
    let b = bank();
    b.model.push(ScriptedTurn::text("Done"));
    let paused = b.agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let held = paused.snapshot_id.clone().unwrap();
    // The interrupted snapshot was saved under a span that names it.
    assert!(
        !capture
            .find(
                "store",
                &[("op", "save_snapshot"), ("store", "memory"), ("snapshot_id", &held)]
            )
            .is_empty(),
        "{:#?}",
        capture.spans()
    );

    let done = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::snapshot(held.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");
    let new_id = done.snapshot_id.clone().unwrap();
    assert_ne!(new_id, held);

    let claims = capture.find(
        "store",
        &[
            ("op", "claim_resume"),
            ("store", "memory"),
            ("snapshot_id", &held),
            ("records", "1"),
        ],
    );
    assert_eq!(claims.len(), 1, "{:#?}", capture.spans());
    let decisions = capture.find("resume_decision", &[("snapshot_id", &held)]);
    assert_eq!(decisions.len(), 1);
    assert!(
        capture.within(claims[0], decisions[0]),
        "the claim runs inside the resume decision"
    );
    // The store minted the new snapshot's id; the span carries it.
    let saves = capture.find("store", &[("op", "save_snapshot"), ("snapshot_id", &new_id)]);
    assert_eq!(saves.len(), 1, "{:#?}", capture.spans());
    // The claim runs in the turn; the commit after it, in the agent's span.
    let turns = capture.find("turn", &[]);
    assert!(turns.iter().any(|t| capture.within(claims[0], *t)));
    let agents = capture.find("agent", &[("agent", "bank"), ("session_id", &done.session_id)]);
    assert!(agents.iter().any(|a| capture.within(saves[0], *a)));

    // A second resume of the same snapshot fails its claim; the span records the error.
    let again = b
        .agent
        .run(
            resume(vec![approve(&b.tool, &paused)]),
            AgentInit::snapshot(held.clone()),
        )
        .await
        .unwrap_err();
    assert_eq!(again.status(), Status::Aborted);
    let claims = capture.find("store", &[("op", "claim_resume"), ("snapshot_id", &held)]);
    assert_eq!(claims.len(), 2);
    let errors: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.span == Some(claims[1]) && e.fields.contains_key("error"))
        .collect();
    assert_eq!(errors.len(), 1, "{:#?}", capture.events());
    assert!(errors[0].fields["error"].contains("already resumed"), "{:?}", errors[0]);
    assert_eq!(b.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_approved_call_is_recorded_as_one_tool_call_that_ran() {
    let capture = Capture::default();
    let _guard = capture.install();
    let model = ScriptedModel::new("m");
    let tool = DynamicTool::new(
        "closeAccount",
        "closes an account",
        json!({"type": "object"}),
        |_ctx: ToolContext, _input| async move {
            tracing::info!("closeAccount body ran");
            Ok(json!({"closed": true}))
        },
    )
    .into_tool();
    let agent = holdpoint::agent::Agent::builder("gated")
        .model(std::sync::Arc::new(model.clone()))
        .tools([tool])
        .middleware(ToolApproval::allow(["getBalance"]).into_middleware())
        .store(std::sync::Arc::new(holdpoint::session::InMemoryStore::new()))
        .build()
        .unwrap();
    model.push(ScriptedTurn::tool_call("closeAccount", json!({"id": 7})));
    model.push(ScriptedTurn::text("closed"));

    let held = agent.run_text("close it").await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let hold = ToolApproval::interrupted(&held.interrupts()[0]).expect("our hold");
    let done = agent
        .run(
            resume(vec![hold.approve(Some("ok")).unwrap()]),
            AgentInit::session(held.session_id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop, "{done:?}");

    let calls = capture.find("tool_call", &[("tool", "closeAccount")]);
    let spans = capture.spans();
    let ran: Vec<usize> = calls
        .iter()
        .copied()
        .filter(|i| spans[*i].fields.get("outcome").map(String::as_str) == Some("ok"))
        .collect();
    assert_eq!(ran.len(), 1, "the approved call is recorded once: {spans:#?}");
    let bodies: Vec<EventRec> = capture
        .events()
        .into_iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some("closeAccount body ran"))
        .collect();
    assert_eq!(bodies.len(), 1, "the tool body ran once");
    let body_span = bodies[0].span.unwrap();
    assert!(
        capture.within(body_span, ran[0]),
        "the body ran inside the recorded call"
    );
    for other in calls.iter().filter(|i| **i != ran[0]) {
        assert!(!capture.within(body_span, *other));
    }

    // The hold: a tool call that did not run, marked interrupted by the
    // approval stage, and an "interrupt held" event naming the tool.
    let holds = capture.find(
        "tool_call",
        &[
            ("tool", "closeAccount"),
            ("outcome", "interrupted"),
            ("held_by", TOOL_APPROVAL),
        ],
    );
    assert_eq!(holds.len(), 1, "{spans:#?}");
    assert_eq!(calls.len(), 2, "one held call, one approved run: {spans:#?}");
    let held_events = capture
        .events()
        .into_iter()
        .filter(|e| {
            e.fields.get("message").map(String::as_str) == Some("interrupt held")
                && e.fields.get("tool").map(String::as_str) == Some("closeAccount")
        })
        .count();
    assert_eq!(held_events, 1);
}
