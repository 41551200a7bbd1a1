//! Middleware: holds recorded as `interruptedBy`, restarts routed to the
//! stage that raised the hold, released outer stages, and model hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use holdpoint::message::metadata;
use holdpoint::middleware::{
    IterationInfo, IterationNext, IterationOutcome, IterationReport, Middleware, ModelNext, ToolHookCall, ToolNext,
};
use holdpoint::tool::{Tool, ToolContext, ToolOutcome};
use holdpoint::{
    GenerateOptions, GenerateRequest, GenerateResponse, Generation, Message, Part, Result, Resume, ScriptedTurn,
    Status, TypedTool, generate, tool,
};
use serde_json::{Map, Value, json};

use crate::support::*;

/// What one stage saw of one call.
#[derive(Debug, Clone, PartialEq)]
struct Visit {
    tag: &'static str,
    resumed: Option<Map<String, Value>>,
    released: bool,
}

type Visits = Arc<Mutex<Vec<Visit>>>;

/// A tool gate: records what it sees; when `hold` is set it holds any call
/// that is neither released nor being resumed at this stage. Resume data
/// `{"deny": true}` turns into a soft failure.
struct Gate {
    name: &'static str,
    tag: &'static str,
    hold: bool,
    visits: Visits,
}

fn gate(name: &'static str, tag: &'static str, hold: bool, visits: &Visits) -> Arc<dyn Middleware> {
    Arc::new(Gate {
        name,
        tag,
        hold,
        visits: Arc::clone(visits),
    })
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

type Resumes = Arc<Mutex<Vec<Option<Map<String, Value>>>>>;

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

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn visits(v: &Visits) -> Vec<Visit> {
    std::mem::take(&mut *v.lock().unwrap())
}

async fn run_with(
    m: &holdpoint::ScriptedModel,
    tools: Vec<Arc<dyn Tool>>,
    middleware: Vec<Arc<dyn Middleware>>,
    messages: Vec<Message>,
    resume: Option<Resume>,
) -> Result<Generation> {
    let mut opts: GenerateOptions = options(m, tools, messages);
    opts.middleware = middleware;
    opts.resume = resume;
    generate(opts).await
}

fn echo_call() -> ScriptedTurn {
    calls(&[("echo", json!({"account": "a"}))])
}

#[tokio::test]
async fn tool_hook_hold_records_interrupted_by_and_skips_the_tool() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let m = model([echo_call()]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![gate("approval", "approval", true, &v)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert!(g.is_interrupted());
    assert!(resumes.lock().unwrap().is_empty(), "a held call must not run");
    let p = &g.response.interrupts()[0];
    assert_eq!(p.interrupted_by(), Some("approval"));
    assert_eq!(p.meta(metadata::INTERRUPTED_BY), Some(&json!("approval")));
    assert_eq!(
        p.interrupt_as::<Value>().unwrap(),
        json!({"heldBy": "approval", "tool": "echo"})
    );
    // The tool's own claim refuses a middleware's hold.
    assert!(echo(&resumes).interrupted(p).is_none());
}

#[tokio::test]
async fn restart_delivers_resume_data_only_to_the_stage_that_held() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let chain = || {
        vec![
            gate("audit", "audit", false, &v),
            gate("approval", "approval", true, &v),
        ]
    };
    let tools = || vec![echo(&resumes).into_tool()];
    let m = model([echo_call(), ScriptedTurn::text("done")]);
    let g = run_with(&m, tools(), chain(), vec![Message::user_text("go")], None)
        .await
        .unwrap();
    assert_eq!(g.response.interrupts()[0].interrupted_by(), Some("approval"));
    visits(&v);
    let restart = g.response.interrupts()[0].restart(Some(json!({"ok": 1}))).unwrap();
    let done = run_with(
        &m,
        tools(),
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        visits(&v),
        [
            Visit {
                tag: "audit",
                resumed: None,
                released: true
            },
            Visit {
                tag: "approval",
                resumed: Some(obj(json!({"ok": 1}))),
                released: false
            },
        ]
    );
    // The tool itself never paused, so it gets no resume data.
    assert_eq!(*resumes.lock().unwrap(), vec![None]);
    assert_eq!(output(&responses(&done.messages[2])[0]), json!("a"));
    let req = &requests(&done.messages[1])[0];
    assert!(!req.is_interrupt());
    assert!(req.meta(metadata::RESOLVED_INTERRUPT).is_some());
}

#[tokio::test]
async fn repeated_middleware_name_is_labelled_with_its_position() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let chain = || {
        vec![
            gate("gate", "outer", false, &v),
            gate("gate", "inner", true, &v),
            gate("last", "last", false, &v),
        ]
    };
    let tools = || vec![echo(&resumes).into_tool()];
    let m = model([echo_call(), ScriptedTurn::text("done")]);
    let g = run_with(&m, tools(), chain(), vec![Message::user_text("go")], None)
        .await
        .unwrap();
    let p = g.response.interrupts()[0].clone();
    assert_eq!(p.interrupted_by(), Some("gate#2"));
    // The stage inside the holder never saw the first call.
    assert_eq!(visits(&v).iter().map(|x| x.tag).collect::<Vec<_>>(), ["outer", "inner"]);

    let restart = p.restart(Some(json!({"why": "fine"}))).unwrap();
    run_with(
        &m,
        tools(),
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        visits(&v),
        [
            Visit {
                tag: "outer",
                resumed: None,
                released: true
            },
            Visit {
                tag: "inner",
                resumed: Some(obj(json!({"why": "fine"}))),
                released: false
            },
            Visit {
                tag: "last",
                resumed: None,
                released: false
            },
        ]
    );
    assert_eq!(*resumes.lock().unwrap(), vec![None]);
}

#[tokio::test]
async fn first_of_repeated_names_keeps_the_plain_name() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let m = model([echo_call()]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![gate("gate", "outer", true, &v), gate("gate", "inner", true, &v)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(g.response.interrupts()[0].interrupted_by(), Some("gate"));
}

#[tokio::test]
async fn tools_own_pause_releases_every_stage_and_resume_data_reaches_the_tool() {
    let v: Visits = Arc::default();
    let log = log();
    let tool = transfer_tool(log.clone());
    let chain = || vec![gate("approval", "approval", false, &v)];
    let m = model([
        calls(&[("transfer", json!({"to": "bob", "amount": 5.0}))]),
        ScriptedTurn::text("ok"),
    ]);
    let g = run_with(
        &m,
        vec![tool.clone().into_tool()],
        chain(),
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    let p = &g.response.interrupts()[0];
    assert_eq!(p.interrupted_by(), None);
    assert!(p.meta(metadata::INTERRUPTED_BY).is_none());
    visits(&v);
    let call = tool.interrupted(p).unwrap();
    let restart = call
        .restart(Some(Approval {
            approved: true,
            level: 1,
        }))
        .unwrap();
    run_with(
        &m,
        vec![tool.into_tool()],
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        visits(&v),
        [Visit {
            tag: "approval",
            resumed: None,
            released: true
        }]
    );
    assert_eq!(
        seen(&log)[1].resume,
        Some(Approval {
            approved: true,
            level: 1
        })
    );
}

#[tokio::test]
async fn restart_with_new_input_is_not_released_by_outer_stages() {
    let v: Visits = Arc::default();
    let log = log();
    let tool = transfer_tool(log.clone());
    let chain = || vec![gate("approval", "approval", false, &v)];
    let m = model([
        calls(&[("transfer", json!({"to": "bob", "amount": 5.0}))]),
        ScriptedTurn::text("ok"),
    ]);
    let g = run_with(
        &m,
        vec![tool.clone().into_tool()],
        chain(),
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    visits(&v);
    let call = tool.interrupted(&g.response.interrupts()[0]).unwrap();
    let restart = call
        .restart_with_input(
            Transfer {
                to: "bob".into(),
                amount: 900.0,
            },
            Some(Approval {
                approved: true,
                level: 1,
            }),
        )
        .unwrap();
    run_with(
        &m,
        vec![tool.into_tool()],
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        visits(&v),
        [Visit {
            tag: "approval",
            resumed: None,
            released: false
        }]
    );
}

#[tokio::test]
async fn holding_stage_can_deny_a_restart_softly() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let chain = || vec![gate("approval", "approval", true, &v)];
    let m = model([echo_call(), ScriptedTurn::text("understood")]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        chain(),
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    let restart = g.response.interrupts()[0].restart(Some(json!({"deny": true}))).unwrap();
    let done = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert!(resumes.lock().unwrap().is_empty());
    assert_eq!(
        output(&last_request_responses(&m)[0]),
        json!({"error": "approval denied the call"})
    );
    assert_eq!(done.response.text(), "understood");
}

#[tokio::test]
async fn respond_answers_a_middleware_hold_without_running_the_tool() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let chain = || vec![gate("approval", "approval", true, &v)];
    let m = model([echo_call(), ScriptedTurn::text("ok")]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        chain(),
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    visits(&v);
    let respond = g.response.interrupts()[0].respond(json!("supplied")).unwrap();
    let done = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![],
            respond: vec![respond],
        }),
    )
    .await
    .unwrap();
    assert!(visits(&v).is_empty(), "a respond runs no hook");
    assert!(resumes.lock().unwrap().is_empty());
    assert_eq!(output(&responses(&done.messages[2])[0]), json!("supplied"));
}

#[tokio::test]
async fn restart_of_a_hold_by_an_absent_middleware_is_rejected() {
    let v: Visits = Arc::default();
    let resumes: Resumes = Arc::default();
    let m = model([echo_call(), ScriptedTurn::text("unused")]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![gate("approval", "approval", true, &v)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    let restart = g.response.interrupts()[0].restart(None).unwrap();
    let err = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![],
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![restart],
            respond: vec![],
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.to_string().contains("\"approval\""), "{err}");
    assert!(resumes.lock().unwrap().is_empty());
}

#[tokio::test]
async fn middleware_hold_beside_a_finished_call_keeps_its_pending_output() {
    let resumes: Resumes = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    /// Holds only `echo`.
    struct EchoGate;
    #[async_trait]
    impl Middleware for EchoGate {
        fn name(&self) -> &str {
            "echoGate"
        }
        async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
            if call.name == "echo" && call.resumed.is_none() && !call.released {
                return Ok(ToolOutcome::Interrupt(Map::new()));
            }
            next.run(call).await
        }
    }
    let tools = || vec![echo(&resumes).into_tool(), balance_tool(count.clone()).into_tool()];
    let chain = || -> Vec<Arc<dyn Middleware>> { vec![Arc::new(EchoGate)] };
    let m = model([
        calls(&[("balance", json!({"account": "x"})), ("echo", json!({"account": "y"}))]),
        ScriptedTurn::text("ok"),
    ]);
    let g = run_with(&m, tools(), chain(), vec![Message::user_text("go")], None)
        .await
        .unwrap();
    let reqs = requests(g.messages.last().unwrap());
    assert_eq!(reqs[0].meta(metadata::PENDING_OUTPUT), Some(&json!("x: $100")));
    assert_eq!(reqs[1].meta(metadata::INTERRUPT), Some(&json!(true)));
    assert_eq!(reqs[1].interrupted_by(), Some("echoGate"));
    let done = run_with(
        &m,
        tools(),
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![reqs[1].restart(None).unwrap()],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let outs: Vec<Value> = responses(&done.messages[2]).iter().map(output).collect();
    assert_eq!(outs, [json!("x: $100"), json!("y")]);
}

#[tokio::test]
async fn tool_hook_can_answer_a_call_itself() {
    struct Cache;
    #[async_trait]
    impl Middleware for Cache {
        fn name(&self) -> &str {
            "cache"
        }
        async fn tool(&self, call: ToolHookCall, _next: ToolNext<'_>) -> Result<ToolOutcome> {
            Ok(ToolOutcome::output(json!(format!("cached {}", call.input["account"]))))
        }
    }
    let resumes: Resumes = Arc::default();
    let m = model([echo_call(), ScriptedTurn::text("ok")]);
    let done = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![Arc::new(Cache)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert!(resumes.lock().unwrap().is_empty());
    assert_eq!(output(&responses(&done.messages[2])[0]), json!("cached \"a\""));
}

#[tokio::test]
async fn tool_hook_sees_name_ref_input_and_request_context() {
    type Calls = Arc<Mutex<Vec<(String, Option<String>, Value, Option<Value>)>>>;
    struct Spy(Calls);
    #[async_trait]
    impl Middleware for Spy {
        fn name(&self) -> &str {
            "spy"
        }
        async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
            self.0.lock().unwrap().push((
                call.name.clone(),
                call.reference.clone(),
                call.input.clone(),
                call.context.get("principal").cloned(),
            ));
            next.run(call).await
        }
    }
    let seen_calls: Calls = Arc::default();
    let resumes: Resumes = Arc::default();
    let m = model([echo_call(), ScriptedTurn::text("ok")]);
    let mut opts = options(&m, vec![echo(&resumes).into_tool()], vec![Message::user_text("go")]);
    opts.middleware = vec![Arc::new(Spy(Arc::clone(&seen_calls)))];
    let mut ctx = Map::new();
    ctx.insert("principal".into(), json!("alice"));
    opts.context = Arc::new(ctx);
    let g = generate(opts).await.unwrap();
    let calls = seen_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "echo");
    assert_eq!(calls[0].1, Some(reference(&requests(&g.messages[1])[0])));
    assert_eq!(calls[0].2, json!({"account": "a"}));
    assert_eq!(calls[0].3, Some(json!("alice")));
}

/// Counts model calls and tags each response.
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
    let m = model([
        calls(&[("balance", json!({"account": "a"}))]),
        calls(&[("balance", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ]);
    let g = run_with(
        &m,
        vec![balance_tool(count).into_tool()],
        vec![Arc::new(ModelSpy {
            seen: Arc::clone(&seen_reqs),
        })],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(g.response.text(), "done");
    let seen_reqs = seen_reqs.lock().unwrap().clone();
    assert_eq!(seen_reqs.len(), 3);
    assert_eq!(seen_reqs, m.requests());
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
    let m = model([ScriptedTurn::text("hi")]);
    let g = run_with(
        &m,
        vec![],
        vec![
            Arc::new(Tag("a", Arc::clone(&order))),
            Arc::new(Tag("b", Arc::clone(&order))),
        ],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(*order.lock().unwrap(), ["a in", "b in", "b out", "a out"]);
    let sent: Vec<String> = m.requests()[0].messages.iter().map(Message::text).collect();
    assert_eq!(sent, ["go", "note from a", "note from b"]);
    assert_eq!(g.response.text(), "hi [b] [a]");
}

#[tokio::test]
async fn stages_see_the_original_input_of_a_revised_restart() {
    type Originals = Arc<Mutex<Vec<(Value, Option<Value>)>>>;
    struct Watch(Originals);
    #[async_trait]
    impl Middleware for Watch {
        fn name(&self) -> &str {
            "watch"
        }
        async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> Result<ToolOutcome> {
            self.0
                .lock()
                .unwrap()
                .push((call.input.clone(), call.original_input.clone()));
            next.run(call).await
        }
    }
    let originals: Originals = Arc::default();
    let log = log();
    let tool = transfer_tool(log.clone());
    let chain = || -> Vec<Arc<dyn Middleware>> { vec![Arc::new(Watch(Arc::clone(&originals)))] };
    let m = model([
        calls(&[("transfer", json!({"to": "bob", "amount": 5.0}))]),
        ScriptedTurn::text("ok"),
    ]);
    let g = run_with(
        &m,
        vec![tool.clone().into_tool()],
        chain(),
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    let call = tool.interrupted(&g.response.interrupts()[0]).unwrap();
    let revised = call
        .restart_with_input(
            Transfer {
                to: "bob".into(),
                amount: 1.0,
            },
            Some(Approval {
                approved: true,
                level: 1,
            }),
        )
        .unwrap();
    run_with(
        &m,
        vec![tool.into_tool()],
        chain(),
        g.messages.clone(),
        Some(Resume {
            metadata: None,
            restart: vec![revised],
            respond: vec![],
        }),
    )
    .await
    .unwrap();
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

/// Records each iteration it wraps: `tag:enter:round`, then
/// `tag:exit:outcome:tools` with the tool names the model asked for. With
/// `budget`, the iteration of that round is refused.
struct Rounds {
    tag: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    budget: Option<u32>,
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

fn rounds(tag: &'static str, log: &Arc<Mutex<Vec<String>>>, budget: Option<u32>) -> Arc<dyn Middleware> {
    Arc::new(Rounds {
        tag,
        log: Arc::clone(log),
        budget,
    })
}

#[tokio::test]
async fn iteration_hooks_wrap_each_round_outermost_first_and_see_how_it_ended() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([
        calls(&[("balance", json!({"account": "a"}))]),
        calls(&[("balance", json!({"account": "b"}))]),
        ScriptedTurn::text("done"),
    ]);
    let g = run_with(
        &m,
        vec![balance_tool(count.clone()).into_tool()],
        vec![rounds("outer", &log, None), rounds("inner", &log, None)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
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
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let resumes: Resumes = Arc::default();
    let v: Visits = Arc::default();
    let m = model([echo_call()]);
    let g = run_with(
        &m,
        vec![echo(&resumes).into_tool()],
        vec![rounds("r", &log, None), gate("approval", "approval", true, &v)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap();
    assert!(g.is_interrupted());
    assert_eq!(*log.lock().unwrap(), ["r:enter:0", "r:exit:Interrupted:echo"]);

    // A budget of one round: the second model call never happens and the
    // tool of the first round ran once.
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let m = model([
        calls(&[("balance", json!({"account": "a"}))]),
        ScriptedTurn::text("never"),
    ]);
    let err = run_with(
        &m,
        vec![balance_tool(count.clone()).into_tool()],
        vec![rounds("r", &log, Some(1))],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Status::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("over the budget"), "{err}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(m.requests().len(), 1, "the refused round made no model call");
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
    let m = model([ScriptedTurn::text("unused")]);
    let err = run_with(
        &m,
        Vec::new(),
        vec![Arc::new(Skipper)],
        vec![Message::user_text("go")],
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("next.run()"), "{err}");
    assert!(m.requests().is_empty());
}
