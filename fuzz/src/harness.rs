//! The tools, models and agents the run-time targets drive, and a fresh
//! single-threaded runtime per input (so nothing outlives one input).

use std::sync::Arc;

use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{InMemoryStore, SessionState, SessionStore, Snapshot};
use holdpoint::tool::DynamicTool;
use holdpoint::{GenerateResponse, Message, ResumableTool, ScriptedModel, ScriptedTurn, Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool names the structured targets use, so directives meet tools.
pub const TOOL_NAMES: [&str; 5] = ["echo", "ask", "fail", "typed", "missing"];

/// A single-threaded runtime with timers (detached runs start a heartbeat).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime starts")
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct TypedIn {
    n: i64,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct TypedRes {
    ok: bool,
}

/// `echo` returns its input, `ask` pauses until restarted, `fail` fails
/// softly, `typed` is a resumable tool with typed input and resume data.
/// (`missing` is deliberately not a tool.)
pub fn tools() -> Vec<Arc<dyn Tool>> {
    let echo = DynamicTool::new("echo", "echoes", json!({"type": "object"}), |_ctx, input| async move {
        Ok(input)
    });
    let ask = DynamicTool::new(
        "ask",
        "asks a person",
        json!({}),
        |ctx: ToolContext, _input| async move {
            match ctx.resumed() {
                Some(data) => Ok(Value::Object(data.clone())),
                None => Err(ctx.interrupt(json!({"question": "go on?"}))),
            }
        },
    )
    .with_output_schema(json!({"type": "object"}));
    let fail = DynamicTool::new(
        "fail",
        "fails softly",
        json!({}),
        |ctx: ToolContext, _input| async move { Err(ctx.fail("no")) },
    );
    let typed = ResumableTool::<TypedIn, i64, TypedRes>::define(
        "typed",
        "typed and resumable",
        |ctx: ToolContext, input: TypedIn, res: Option<TypedRes>| async move {
            match res {
                None => Err(ctx.interrupt(json!({"n": input.n}))),
                Some(r) if r.ok => Ok(input.n),
                Some(_) => Err(ctx.fail("declined")),
            }
        },
    )
    .expect("TypedRes is a struct");
    vec![echo.into_tool(), ask.into_tool(), fail.into_tool(), typed.into_tool()]
}

/// A model that answers every call with `response` (a model's output is
/// outside input too), or with plain text when none is given.
pub fn model(response: Option<GenerateResponse>) -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::from_fn("fuzz", move |_req, _i| {
            Some(match &response {
                Some(r) => ScriptedTurn::response(r.clone()),
                None => ScriptedTurn::text("done"),
            })
        })
        .without_recording(),
    )
}

/// A prompt agent over [`tools`]: with a store (server-managed) or without
/// (client-managed), and optionally behind ToolApproval.
pub fn agent(store: Option<Arc<dyn SessionStore>>, approval: bool) -> Agent {
    let mut b = Agent::builder("fuzzAgent")
        .model(model(None))
        .tools(tools())
        .max_turns(3);
    if approval {
        b = b.middleware(Arc::new(ToolApproval::allow(["echo", "fail"])));
    }
    if let Some(store) = store {
        b = b.store(store);
    }
    b.build().expect("the fuzz agent builds")
}

/// Stores `state` as a completed snapshot and returns its id.
pub async fn seed(store: &InMemoryStore, state: SessionState) -> Option<String> {
    let mut row = Snapshot::new(state);
    if row.session_id.is_empty() {
        row.session_id = "fuzz-session".into();
    }
    row.finish_reason = Some(holdpoint::FinishReason::Interrupted);
    row.agent = Some("fuzzAgent".into());
    let saved = store
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .ok()??;
    Some(saved.snapshot_id)
}

/// Runs `input` and checks the promises of a finished run: no caught
/// panic, and a failed output carries an error.
pub async fn run_checked(agent: &Agent, input: AgentInput, init: AgentInit) -> Option<AgentOutput> {
    match agent.run(input, init).await {
        Ok(out) => {
            if let Some(err) = &out.error {
                assert!(!err.message.contains("panicked"), "a turn panicked: {}", err.message);
            }
            if out.finish_reason == holdpoint::FinishReason::Failed {
                assert!(out.error.is_some(), "a failed output without an error");
            }
            Some(out)
        }
        Err(e) => {
            crate::assert_no_caught_panic(&e);
            None
        }
    }
}

/// The history every seed corpus starts from: a user message and a model
/// message whose `ask` call is paused.
pub fn paused_history() -> Vec<Message> {
    let mut paused = holdpoint::Part::tool_request("ask", Some("r1".into()), Some(json!({"q": 1})));
    paused.set_meta("interrupt", json!({"question": "go on?"}));
    vec![
        Message::user_text("hi"),
        Message::new(holdpoint::Role::Model, vec![paused]),
    ]
}
