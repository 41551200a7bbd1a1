//! Middleware: holds recorded as `interruptedBy`, restarts routed to the
//! stage that raised the hold, released outer stages, and model hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use holdpoint::message::metadata;
use holdpoint::middleware::{
    IterationInfo, IterationNext, IterationOutcome, IterationReport, Middleware, ModelNext, ToolHookCall, ToolNext,
};
use holdpoint::tool::{ToolContext, ToolOutcome};
use holdpoint::{GenerateRequest, GenerateResponse, Message, Part, Result, ScriptedTurn, Status, TypedTool, tool};
use serde_json::{Map, Value, json};

use crate::scenario::{Scenario, outputs};
use crate::support::*;

/// What one stage saw of one call.
#[derive(Debug, Clone, PartialEq)]
struct Visit {
    tag: &'static str,
    resumed: Option<Map<String, Value>>,
    released: bool,
}

impl Visit {
    /// A call the stage saw neither released nor resumed.
    fn plain(tag: &'static str) -> Visit {
        Visit {
            tag,
            resumed: None,
            released: false,
        }
    }

    /// A restart released past the stage: the hold was not raised here.
    fn released(tag: &'static str) -> Visit {
        Visit {
            released: true,
            ..Visit::plain(tag)
        }
    }

    /// A restart of the stage's own hold, carrying resume data `data`.
    fn resumed(tag: &'static str, data: Value) -> Visit {
        Visit {
            resumed: Some(data.as_object().cloned().expect("resume data is an object")),
            ..Visit::plain(tag)
        }
    }
}

type Visits = Arc<Mutex<Vec<Visit>>>;

/// The visits recorded so far, which it clears.
fn visits(v: &Visits) -> Vec<Visit> {
    std::mem::take(&mut *v.lock().unwrap())
}

/// A tool gate: records what it sees; when `hold` is set it holds any call
/// that is neither released nor being resumed at this stage. Resume data
/// `{"deny": true}` turns into a soft failure.
struct Gate {
    name: &'static str,
    tag: &'static str,
    hold: bool,
    visits: Visits,
}

impl Gate {
    /// A gate named `tag` that holds every call.
    fn holding(tag: &'static str, visits: &Visits) -> Gate {
        Gate {
            name: tag,
            tag,
            hold: true,
            visits: Arc::clone(visits),
        }
    }

    /// A gate named `tag` that lets every call through.
    fn passing(tag: &'static str, visits: &Visits) -> Gate {
        Gate {
            hold: false,
            ..Gate::holding(tag, visits)
        }
    }

    /// The same gate under the middleware name `name`.
    fn named(self, name: &'static str) -> Gate {
        Gate { name, ..self }
    }
}

#[async_trait]
impl Middleware for Gate {
    fn name(&self) -> &str {
        self.name
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        self.visits.lock().unwrap().push(Visit {
            tag: self.tag,
            resumed: call.resumed.clone(),
            released: call.released,
        });
        if let Some(r) = &call.resumed {
            if r.get("deny") == Some(&json!(true)) {
                return Ok(ToolOutcome::Failed(format!("{} denied the call", self.tag)));
            }
            return next.run(call).await;
        }
        if self.hold && !call.released {
            let mut data = Map::new();
            data.insert("heldBy".into(), json!(self.tag));
            data.insert("tool".into(), json!(call.name));
            return Ok(ToolOutcome::Interrupt(data));
        }
        next.run(call).await
    }
}

/// A tool stage named `name` that looks at each call before the stages
/// inside it: `f` answering `Some` settles the call with that outcome,
/// `None` passes it on.
struct ToolHook<F> {
    name: &'static str,
    f: F,
}

fn tool_hook<F>(name: &'static str, f: F) -> ToolHook<F>
where
    F: Fn(&ToolHookCall) -> Option<ToolOutcome> + Send + Sync,
{
    ToolHook { name, f }
}

#[async_trait]
impl<F> Middleware for ToolHook<F>
where
    F: Fn(&ToolHookCall) -> Option<ToolOutcome> + Send + Sync,
{
    fn name(&self) -> &str {
        self.name
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
        match (self.f)(&call) {
            Some(outcome) => Ok(outcome),
            None => next.run(call).await,
        }
    }
}

type Resumes = Arc<Mutex<Vec<Option<Map<String, Value>>>>>;

/// The resume data of every echo run so far.
fn ran(resumes: &Resumes) -> Vec<Option<Map<String, Value>>> {
    resumes.lock().unwrap().clone()
}

/// `echo`: records the resume data it saw and returns its account.
fn echo(resumes: &Resumes) -> TypedTool<Account, String> {
    let r = Arc::clone(resumes);
    tool("echo", "echoes", move |ctx: ToolContext, a: Account| {
        let r = Arc::clone(&r);
        async move {
            r.lock().unwrap().push(ctx.resumed().cloned());
            Ok(a.account)
        }
    })
}

fn echo_call() -> ScriptedTurn {
    calls(&[("echo", json!({"account": "a"}))])
}

/// The model calls `echo` once, then says `reply`.
fn echo_then(reply: &str, resumes: &Resumes) -> Scenario {
    Scenario::new([echo_call(), ScriptedTurn::text(reply)]).tool(echo(resumes))
}

/// Two rounds that each call `balance`, then "done".
fn two_balance_rounds() -> [ScriptedTurn; 3] {
    [
        calls(&[("balance", json!({"account": "a"}))]),
        calls(&[("balance", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ]
}

#[tokio::test]
async fn tool_hook_hold_records_interrupted_by_and_skips_the_tool() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = Scenario::new([echo_call()])
        .tool(echo(&resumes))
        .middleware(Gate::holding("approval", &v));
    let paused = s.pause().await;
    assert!(ran(&resumes).is_empty(), "a held call must not run");
    let p = paused.hold(0);
    assert_eq!(p.interrupted_by(), Some("approval"));
    assert_eq!(p.meta(metadata::INTERRUPTED_BY), Some(&json!("approval")));
    assert_eq!(
        p.interrupt_as::<Value>().unwrap(),
        json!({"heldBy": "approval", "tool": "echo"})
    );
    // The tool's own claim refuses a middleware's hold.
    assert!(echo(&resumes).interrupted(&p).is_none());
}

#[tokio::test]
async fn restart_delivers_resume_data_only_to_the_stage_that_held() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = echo_then("done", &resumes)
        .middleware(Gate::passing("audit", &v))
        .middleware(Gate::holding("approval", &v));
    let paused = s.pause().await;
    assert_eq!(paused.hold(0).interrupted_by(), Some("approval"));
    visits(&v);

    let done = paused.restart_with(0, json!({"ok": 1})).resume().await;
    assert_eq!(
        visits(&v),
        [Visit::released("audit"), Visit::resumed("approval", json!({"ok": 1}))]
    );
    // The tool itself never paused, so it gets no resume data.
    assert_eq!(ran(&resumes), vec![None]);
    assert_eq!(outputs(&done)[0], json!("a"));
    let req = &requests(&done.messages[1])[0];
    assert!(!req.is_interrupt());
    assert!(req.meta(metadata::RESOLVED_INTERRUPT).is_some());
}

#[tokio::test]
async fn repeated_middleware_name_is_labelled_with_its_position() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = echo_then("done", &resumes)
        .middleware(Gate::passing("outer", &v).named("gate"))
        .middleware(Gate::holding("inner", &v).named("gate"))
        .middleware(Gate::passing("last", &v));
    let paused = s.pause().await;
    assert_eq!(paused.hold(0).interrupted_by(), Some("gate#2"));
    // The stage inside the holder never saw the first call.
    assert_eq!(visits(&v).iter().map(|x| x.tag).collect::<Vec<_>>(), ["outer", "inner"]);

    paused.restart_with(0, json!({"why": "fine"})).resume().await;
    assert_eq!(
        visits(&v),
        [
            Visit::released("outer"),
            Visit::resumed("inner", json!({"why": "fine"})),
            Visit::plain("last"),
        ]
    );
    assert_eq!(ran(&resumes), vec![None]);
}

#[tokio::test]
async fn first_of_repeated_names_keeps_the_plain_name() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = Scenario::new([echo_call()])
        .tool(echo(&resumes))
        .middleware(Gate::holding("outer", &v).named("gate"))
        .middleware(Gate::holding("inner", &v).named("gate"));
    assert_eq!(s.pause().await.hold(0).interrupted_by(), Some("gate"));
}

#[tokio::test]
async fn tools_own_pause_releases_every_stage_and_resume_data_reaches_the_tool() {
    let v = Visits::default();
    let (s, transfer, log) = pay_bob("ok");
    let s = s.middleware(Gate::passing("approval", &v));
    let paused = s.pause().await;
    let p = paused.hold(0);
    assert_eq!(p.interrupted_by(), None);
    assert!(p.meta(metadata::INTERRUPTED_BY).is_none());
    visits(&v);

    let call = paused.claim(&transfer, 0);
    paused.restart(call.restart(Some(approval(1)))).resume().await;
    assert_eq!(visits(&v), [Visit::released("approval")]);
    assert_eq!(seen(&log)[1].resume, Some(approval(1)));
}

#[tokio::test]
async fn restart_with_new_input_is_not_released_by_outer_stages() {
    let v = Visits::default();
    let (s, transfer, _) = pay_bob("ok");
    let s = s.middleware(Gate::passing("approval", &v));
    let paused = s.pause().await;
    visits(&v);

    let call = paused.claim(&transfer, 0);
    let revised = call.restart_with_input(transfer_of(900.0, "bob"), Some(approval(1)));
    paused.restart(revised).resume().await;
    assert_eq!(visits(&v), [Visit::plain("approval")]);
}

#[tokio::test]
async fn holding_stage_can_deny_a_restart_softly() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = echo_then("understood", &resumes).middleware(Gate::holding("approval", &v));
    let done = s.pause().await.restart_with(0, json!({"deny": true})).resume().await;
    assert!(ran(&resumes).is_empty());
    assert_eq!(
        output(&last_request_responses(&s.model)[0]),
        json!({"error": "approval denied the call"})
    );
    assert_eq!(done.response.text(), "understood");
}

#[tokio::test]
async fn respond_answers_a_middleware_hold_without_running_the_tool() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = echo_then("ok", &resumes).middleware(Gate::holding("approval", &v));
    let paused = s.pause().await;
    visits(&v);

    let done = paused.respond_with(0, json!("supplied")).resume().await;
    assert!(visits(&v).is_empty(), "a respond runs no hook");
    assert!(ran(&resumes).is_empty());
    assert_eq!(outputs(&done)[0], json!("supplied"));
}

#[tokio::test]
async fn restart_of_a_hold_by_an_absent_middleware_is_rejected() {
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = echo_then("unused", &resumes).middleware(Gate::holding("approval", &v));
    let err = s
        .pause()
        .await
        .bare_restart(0)
        .without_middleware()
        .resume_fails()
        .await;
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("\"approval\""), "{err}");
    assert!(ran(&resumes).is_empty());
}

#[tokio::test]
async fn middleware_hold_beside_a_finished_call_keeps_its_pending_output() {
    // Holds only `echo`.
    let echo_gate = tool_hook("echoGate", |call| {
        let hold = call.name == "echo" && call.resumed.is_none() && !call.released;
        hold.then(|| ToolOutcome::Interrupt(Map::new()))
    });
    let resumes = Resumes::default();
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([
        calls(&[("balance", json!({"account": "x"})), ("echo", json!({"account": "y"}))]),
        ScriptedTurn::text("ok"),
    ])
    .tool(echo(&resumes))
    .tool(balance_tool(count.clone()))
    .middleware(echo_gate);
    let paused = s.pause().await;
    let reqs = paused.requests();
    assert_eq!(reqs[0].meta(metadata::PENDING_OUTPUT), Some(&json!("x: $100")));
    assert_eq!(reqs[1].meta(metadata::INTERRUPT), Some(&json!(true)));
    assert_eq!(reqs[1].interrupted_by(), Some("echoGate"));

    let done = paused.restart(reqs[1].restart(None)).resume().await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(outputs(&done), [json!("x: $100"), json!("y")]);
}

#[tokio::test]
async fn tool_hook_can_answer_a_call_itself() {
    let cache = tool_hook("cache", |call| {
        Some(ToolOutcome::output(json!(format!("cached {}", call.input["account"]))))
    });
    let resumes = Resumes::default();
    let done = echo_then("ok", &resumes).middleware(cache).run().await.unwrap();
    assert!(ran(&resumes).is_empty());
    assert_eq!(outputs(&done)[0], json!("cached \"a\""));
}

#[tokio::test]
async fn tool_hook_sees_name_ref_input_and_request_context() {
    type Calls = Arc<Mutex<Vec<(String, Option<String>, Value, Option<Value>)>>>;
    let seen_calls = Calls::default();
    let record = Arc::clone(&seen_calls);
    let spy = tool_hook("spy", move |call| {
        record.lock().unwrap().push((
            call.name.clone(),
            call.reference.clone(),
            call.input.clone(),
            call.context.get("principal").cloned(),
        ));
        None
    });
    let resumes = Resumes::default();
    let g = echo_then("ok", &resumes)
        .middleware(spy)
        .context("principal", json!("alice"))
        .run()
        .await
        .unwrap();
    let calls = seen_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "echo");
    assert_eq!(calls[0].1, Some(reference(&requests(&g.messages[1])[0])));
    assert_eq!(calls[0].2, json!({"account": "a"}));
    assert_eq!(calls[0].3, Some(json!("alice")));
}

/// Records every model request it passes on.
struct ModelSpy {
    seen: Arc<Mutex<Vec<GenerateRequest>>>,
}

#[async_trait]
impl Middleware for ModelSpy {
    fn name(&self) -> &str {
        "modelSpy"
    }
    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> Result<GenerateResponse> {
        self.seen.lock().unwrap().push(request.clone());
        next.run(request).await
    }
}

#[tokio::test]
async fn model_hook_sees_every_model_request() {
    let seen_reqs: Arc<Mutex<Vec<GenerateRequest>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new(two_balance_rounds())
        .tool(balance_tool(count))
        .middleware(ModelSpy {
            seen: Arc::clone(&seen_reqs),
        });
    let g = s.run().await.unwrap();
    assert_eq!(g.response.text(), "done");
    let seen_reqs = seen_reqs.lock().unwrap().clone();
    assert_eq!(seen_reqs.len(), 3);
    assert_eq!(seen_reqs, s.model.requests());
}

#[tokio::test]
async fn model_hooks_nest_outermost_first_and_may_rewrite() {
    struct Tag(&'static str, Arc<Mutex<Vec<String>>>);
    #[async_trait]
    impl Middleware for Tag {
        fn name(&self) -> &str {
            self.0
        }
        async fn model(&self, mut request: GenerateRequest, next: ModelNext<'_>) -> Result<GenerateResponse> {
            self.1.lock().unwrap().push(format!("{} in", self.0));
            request
                .messages
                .push(Message::user_text(format!("note from {}", self.0)));
            let mut resp = next.run(request).await?;
            self.1.lock().unwrap().push(format!("{} out", self.0));
            if let Some(msg) = &mut resp.message {
                msg.content.push(Part::text(format!(" [{}]", self.0)));
            }
            Ok(resp)
        }
    }
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = Scenario::new([ScriptedTurn::text("hi")])
        .middleware(Tag("a", Arc::clone(&order)))
        .middleware(Tag("b", Arc::clone(&order)));
    let g = s.run().await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["a in", "b in", "b out", "a out"]);
    let sent: Vec<String> = s.model.requests()[0].messages.iter().map(Message::text).collect();
    assert_eq!(sent, ["go", "note from a", "note from b"]);
    assert_eq!(g.response.text(), "hi [b] [a]");
}

#[tokio::test]
async fn stages_see_the_original_input_of_a_revised_restart() {
    type Originals = Arc<Mutex<Vec<(Value, Option<Value>)>>>;
    let originals = Originals::default();
    let record = Arc::clone(&originals);
    let watch = tool_hook("watch", move |call| {
        let seen = (call.input.clone(), call.original_input.clone());
        record.lock().unwrap().push(seen);
        None
    });
    let (s, transfer, log) = pay_bob("ok");
    let s = s.middleware(watch);
    let paused = s.pause().await;
    let call = paused.claim(&transfer, 0);
    let revised = call.restart_with_input(transfer_of(1.0, "bob"), Some(approval(1)));
    paused.restart(revised).resume().await;
    assert_eq!(
        *originals.lock().unwrap(),
        vec![
            (json!({"to": "bob", "amount": 5.0}), None),
            (
                json!({"to": "bob", "amount": 1.0}),
                Some(json!({"to": "bob", "amount": 5.0}))
            ),
        ]
    );
    assert_eq!(seen(&log)[1].input.amount, 1.0);
}

type Lines = Arc<Mutex<Vec<String>>>;

/// Records each iteration it wraps: `tag:enter:round`, then
/// `tag:exit:outcome:tools` with the tool names the model asked for. With
/// `budget`, the iteration of that round is refused.
struct Rounds {
    tag: &'static str,
    log: Lines,
    budget: Option<u32>,
}

impl Rounds {
    /// Records every round into `log`, refusing none.
    fn recording(tag: &'static str, log: &Lines) -> Rounds {
        Rounds {
            tag,
            log: Arc::clone(log),
            budget: None,
        }
    }

    /// The same, but refuses round `round`.
    fn refusing(self, round: u32) -> Rounds {
        Rounds {
            budget: Some(round),
            ..self
        }
    }
}

#[async_trait]
impl Middleware for Rounds {
    fn name(&self) -> &str {
        "rounds"
    }

    async fn iteration(&self, info: IterationInfo, next: IterationNext<'_>) -> Result<IterationReport> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:enter:{}", self.tag, info.round));
        if self.budget == Some(info.round) {
            return Err(holdpoint::Error::with_status(
                Status::ResourceExhausted,
                format!("round {} is over the budget", info.round),
            ));
        }
        let report = next.run().await?;
        let tools: Vec<String> = report
            .message
            .iter()
            .flat_map(|m| m.tool_requests())
            .filter_map(|p| p.as_tool_request().map(|r| r.name.clone()))
            .collect();
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:exit:{:?}:{}", self.tag, report.outcome, tools.join(",")));
        Ok(report)
    }
}

#[tokio::test]
async fn iteration_hooks_wrap_each_round_outermost_first_and_see_how_it_ended() {
    let log = Lines::default();
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new(two_balance_rounds())
        .tool(balance_tool(count.clone()))
        .middleware(Rounds::recording("outer", &log))
        .middleware(Rounds::recording("inner", &log));
    let g = s.run().await.unwrap();
    assert_eq!(g.response.text(), "done");
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "outer:enter:0",
            "inner:enter:0",
            "inner:exit:Continue:balance",
            "outer:exit:Continue:balance",
            "outer:enter:1",
            "inner:enter:1",
            "inner:exit:Continue:balance",
            "outer:exit:Continue:balance",
            "outer:enter:2",
            "inner:enter:2",
            "inner:exit:Finished:",
            "outer:exit:Finished:",
        ]
    );
}

#[tokio::test]
async fn an_iteration_hook_sees_a_pause_and_can_stop_the_generation() {
    let log = Lines::default();
    let (v, resumes) = (Visits::default(), Resumes::default());
    let s = Scenario::new([echo_call()])
        .tool(echo(&resumes))
        .middleware(Rounds::recording("r", &log))
        .middleware(Gate::holding("approval", &v));
    s.pause().await;
    assert_eq!(*log.lock().unwrap(), ["r:enter:0", "r:exit:Interrupted:echo"]);

    // A budget of one round: the second model call never happens and the
    // tool of the first round ran once.
    let log = Lines::default();
    let count = Arc::new(AtomicUsize::new(0));
    let s = Scenario::new([
        calls(&[("balance", json!({"account": "a"}))]),
        ScriptedTurn::text("never"),
    ])
    .tool(balance_tool(count.clone()))
    .middleware(Rounds::recording("r", &log).refusing(1));
    let err = s.run().await.unwrap_err();
    assert_eq!(err.status(), Status::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("over the budget"), "{err}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(s.model.requests().len(), 1, "the refused round made no model call");
}

#[tokio::test]
async fn an_iteration_hook_that_skips_next_is_a_clear_error() {
    struct Skipper;
    #[async_trait]
    impl Middleware for Skipper {
        fn name(&self) -> &str {
            "skipper"
        }
        async fn iteration(&self, _info: IterationInfo, _next: IterationNext<'_>) -> Result<IterationReport> {
            Ok(IterationReport {
                message: None,
                outcome: IterationOutcome::Finished,
            })
        }
    }
    let s = Scenario::new([ScriptedTurn::text("unused")]).middleware(Skipper);
    let err = s.run().await.unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("next.run()"), "{err}");
    assert!(s.model.requests().is_empty());
}

/// The interrupt data each restart of `ticket` said it answers.
type Answered = Arc<Mutex<Vec<Option<Map<String, Value>>>>>;

/// A tool that pauses with `{"ticket": "t-1"}` until restarted, recording
/// the interrupt data each restart says it answers.
fn ticket_tool(seen: &Answered) -> holdpoint::tool::DynamicTool {
    let seen = Arc::clone(seen);
    holdpoint::tool::DynamicTool::new(
        "ticket",
        "pauses once",
        json!({"type": "object"}),
        move |ctx, _input| {
            let seen = Arc::clone(&seen);
            async move {
                if !ctx.is_resumed() {
                    return Err(ctx.interrupt(json!({"ticket": "t-1"})));
                }
                seen.lock().unwrap().push(ctx.answered_interrupt().cloned());
                Ok(json!("done"))
            }
        },
    )
}

#[tokio::test]
async fn a_restart_of_the_tools_own_hold_shows_the_interrupt_it_answers() {
    let seen = Answered::default();
    let s = Scenario::new([calls(&[("ticket", json!({}))]), ScriptedTurn::text("ok")]).tool(ticket_tool(&seen));
    let paused = s.pause().await;
    paused.restart_with(0, json!({"answer": 1})).resume().await;
    let expected = json!({"ticket": "t-1"}).as_object().cloned();
    assert_eq!(*seen.lock().unwrap(), vec![expected]);
}

#[tokio::test]
async fn a_middleware_hold_shows_the_tool_no_interrupt() {
    let (v, seen) = (
        Visits::default(),
        Arc::<Mutex<Vec<Option<Map<String, Value>>>>>::default(),
    );
    let s = Scenario::new([calls(&[("ticket", json!({}))]), ScriptedTurn::text("ok")])
        .tool(ticket_tool(&seen))
        .middleware(Gate::holding("approval", &v));
    let paused = s.pause().await;
    // Released by the gate, the tool runs as a first call (no resume data,
    // no interrupt of its own to answer) and pauses itself.
    let again = paused.restart_with(0, json!({"ok": 1})).pause().await;
    assert_eq!(
        again.hold(0).interrupt_data(),
        json!({"ticket": "t-1"}).as_object().cloned()
    );
    // Answering the tool's own hold shows it that hold.
    again.restart_with(0, json!({"answer": 2})).resume().await;
    let expected = json!({"ticket": "t-1"}).as_object().cloned();
    assert_eq!(*seen.lock().unwrap(), vec![expected]);
}
