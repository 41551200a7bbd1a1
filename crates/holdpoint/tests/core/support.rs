//! Shared fixtures: typed tool types, a recording transfer tool, scripted
//! turns with several tool calls, payment scenarios, chunk collection and
//! generate helpers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use holdpoint::model::ChunkSink;
use holdpoint::tool::{Tool, ToolContext};
use holdpoint::{
    GenerateChunk, GenerateOptions, GenerateResponse, Generation, Message, Part, Result, ResumableTool, Role,
    ScriptedModel, ScriptedTurn, TypedTool, generate, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::scenario::Scenario;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transfer {
    pub to: String,
    pub amount: f64,
}

/// Resume data with required fields and a non-zero `Default`, so a bare
/// restart can only produce it through `Res::default()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    pub approved: bool,
    pub level: u32,
}

impl Default for Approval {
    fn default() -> Self {
        Approval {
            approved: false,
            level: 7,
        }
    }
}

/// An approval at `level`.
pub fn approval(level: u32) -> Approval {
    Approval { approved: true, level }
}

/// A transfer of `amount` to `to`.
pub fn transfer_of(amount: f64, to: &str) -> Transfer {
    Transfer { to: to.into(), amount }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Receipt {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    pub details: String,
}

/// One invocation of the transfer tool, as the tool saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub input: Transfer,
    pub resume: Option<Approval>,
    pub original_input: Option<Value>,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

pub fn log() -> Log {
    Arc::default()
}

pub fn seen(log: &Log) -> Vec<Seen> {
    log.lock().unwrap().clone()
}

/// The transfer tool's type.
pub type TransferTool = ResumableTool<Transfer, Receipt, Approval>;

/// `transfer`: pauses with `{"details": …}` on the first call; on a restart
/// succeeds when approved and fails softly ("denied") otherwise.
pub fn transfer_tool(log: Log) -> TransferTool {
    ResumableTool::define(
        "transfer",
        "Moves money; needs approval",
        move |ctx: ToolContext, t: Transfer, res: Option<Approval>| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push(Seen {
                    input: t.clone(),
                    resume: res.clone(),
                    original_input: ctx.original_input().cloned(),
                });
                match res {
                    None => Err(ctx.interrupt(json!({"details": format!("send {} to {}", t.amount, t.to)}))),
                    Some(a) if a.approved => Ok(Receipt {
                        id: format!("txn-{}-{}", t.to, t.amount),
                    }),
                    Some(_) => Err(ctx.fail("denied")),
                }
            }
        },
    )
    .unwrap()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Account {
    pub account: String,
}

/// `balance`: a plain typed tool that counts its calls.
pub fn balance_tool(count: Arc<AtomicUsize>) -> TypedTool<Account, String> {
    tool(
        "balance",
        "Returns the balance",
        move |_ctx: ToolContext, a: Account| {
            let count = Arc::clone(&count);
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(format!("{}: $100", a.account))
            }
        },
    )
}

/// A model turn asking for several tool calls (no refs).
pub fn calls(requests: &[(&str, Value)]) -> ScriptedTurn {
    let parts = requests
        .iter()
        .map(|(name, input)| Part::tool_request(*name, None, Some(input.clone())))
        .collect();
    ScriptedTurn::response(GenerateResponse::from_message(Message::new(Role::Model, parts)))
}

/// A model turn with the given parts.
pub fn turn(parts: Vec<Part>) -> ScriptedTurn {
    ScriptedTurn::response(GenerateResponse::from_message(Message::new(Role::Model, parts)))
}

pub fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> ScriptedModel {
    let m = ScriptedModel::new("scripted");
    for t in turns {
        m.push(t);
    }
    m
}

pub fn options(model: &ScriptedModel, tools: Vec<Arc<dyn Tool>>, messages: Vec<Message>) -> GenerateOptions {
    GenerateOptions::new(Arc::new(model.clone()))
        .tools(tools)
        .messages(messages)
}

pub async fn start(model: &ScriptedModel, tools: Vec<Arc<dyn Tool>>, prompt: &str) -> Result<Generation> {
    generate(options(model, tools, vec![Message::user_text(prompt)])).await
}

/// A sink that records every chunk, and the chunks it recorded.
pub fn collector() -> (ChunkSink, Arc<Mutex<Vec<GenerateChunk>>>) {
    let store: Arc<Mutex<Vec<GenerateChunk>>> = Arc::default();
    let s = Arc::clone(&store);
    (ChunkSink::new(move |c| s.lock().unwrap().push(c)), store)
}

/// The tool-request parts of a message.
pub fn requests(message: &Message) -> Vec<Part> {
    message.tool_requests().cloned().collect()
}

/// The tool-response parts of a message.
pub fn responses(message: &Message) -> Vec<Part> {
    message
        .content
        .iter()
        .filter(|p| p.as_tool_response().is_some())
        .cloned()
        .collect()
}

/// The output of a tool-response part.
pub fn output(part: &Part) -> Value {
    part.as_tool_response().unwrap().output.clone().unwrap()
}

/// The ref of a tool-request or tool-response part.
pub fn reference(part: &Part) -> String {
    if let Some(r) = part.as_tool_request() {
        return r.reference.clone().unwrap();
    }
    part.as_tool_response().unwrap().reference.clone().unwrap()
}

/// Every tool-response part the model was shown in its last request.
pub fn last_request_responses(model: &ScriptedModel) -> Vec<Part> {
    let reqs = model.requests();
    let last = reqs.last().unwrap();
    last.messages.iter().flat_map(responses).collect()
}

/// The input of a transfer of 5 to bob.
pub const BOB: fn() -> Value = || json!({"to": "bob", "amount": 5.0});

/// The model asks to send bob 5, then says `reply`; the transfer tool
/// records every run into the log.
pub fn pay_bob(reply: &str) -> (Scenario, TransferTool, Log) {
    pay(calls(&[("transfer", BOB())]), reply)
}

/// The model asks to send ann 1 and bob 2 in one turn, then says `reply`.
pub fn pay_ann_and_bob(reply: &str) -> (Scenario, TransferTool, Log) {
    let both = calls(&[
        ("transfer", json!({"to": "ann", "amount": 1.0})),
        ("transfer", json!({"to": "bob", "amount": 2.0})),
    ]);
    pay(both, reply)
}

/// The model asks for `turn`, then says `reply`; the transfer tool records
/// every run into the log.
pub fn pay(turn: ScriptedTurn, reply: &str) -> (Scenario, TransferTool, Log) {
    let log = log();
    let transfer = transfer_tool(log.clone());
    let s = Scenario::new([turn, ScriptedTurn::text(reply)]).tool(transfer.clone());
    (s, transfer, log)
}
