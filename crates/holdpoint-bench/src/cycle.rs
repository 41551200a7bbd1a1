//! One approval cycle: new session → "Transfer $500 to savings" → the
//! transfer pauses → the caller claims and approves it by session id → the
//! tool runs → "Done: txn-123". Every step is checked.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use holdpoint::agent::Agent;
use holdpoint::message::Role;
use holdpoint::session::{Observed, SessionStore, StoreObserver, StoreOp, observe};
use holdpoint::{Error, Part, ResumableTool, ScriptedModel, ScriptedTurn, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The user's request.
pub const REQUEST: &str = "Transfer $500 to savings";

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    amount: f64,
    to_account: String,
}

#[derive(Serialize, Deserialize, JsonSchema, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
pub struct TransferResult {
    success: bool,
    transaction_id: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
pub struct Approval {
    pub(crate) approved: bool,
}

impl holdpoint::approval::ApprovalReply for Approval {
    fn approve(_reason: Option<String>) -> Self {
        Approval { approved: true }
    }

    fn deny(_reason: Option<String>) -> Self {
        Approval { approved: false }
    }
}

/// The interrupt data of the transfer's hold.
#[derive(Deserialize)]
pub(crate) struct Details {
    pub(crate) details: String,
}

/// The transfer tool of the workload.
pub type TransferTool = ResumableTool<Transfer, TransferResult, Approval>;

/// Counts durable commits: every store operation that writes (saves,
/// inserts, claims, audited saves, grant uses), through the core's one
/// decorator, [`observe`], so the counted store forwards exactly what the
/// store it wraps has (the policy gate's grant reads included, as a
/// deployment pays them).
#[derive(Default)]
pub struct Commits {
    /// Commits so far.
    pub commits: AtomicU64,
}

impl StoreObserver for Commits {
    type Started = ();

    fn start(&self, op: StoreOp) {
        if op.writes {
            self.commits.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn finish(&self, _op: StoreOp, (): (), _error: Option<&Error>) {}
}

/// A store whose commits are counted ([`counting`] builds one).
pub type CountingStore = Observed<dyn SessionStore, Commits>;

/// `inner`, its commits counted: read them from `store.observer()`.
pub fn counting(inner: Arc<dyn SessionStore>) -> CountingStore {
    observe(inner, Arc::new(Commits::default()))
}

/// The scripted model of the workload: turn 1 asks for the transfer, turn 2
/// reports the transaction id it finds in the tool result.
fn model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/bench", |request, _| {
        let last = request.messages.last()?;
        Some(if last.role == Role::Tool {
            let output = last.content.first()?.as_tool_response()?.output.clone()?;
            match output.get("transactionId").and_then(|v| v.as_str()) {
                Some(txn) if output["success"] == json!(true) => ScriptedTurn::text(format!("Done: {txn}")),
                _ => ScriptedTurn::text("failed"),
            }
        } else {
            ScriptedTurn::tool_call("transferMoney", json!({"amount": 500, "toAccount": "savings"}))
        })
    })
    .without_recording()
}

/// The agent and the tool whose interrupts the caller claims.
pub fn setup(store: Arc<dyn SessionStore>) -> holdpoint::Result<(Agent, TransferTool)> {
    let (builder, tool) = builder(store, false)?;
    Ok((builder.build()?, tool))
}

/// [`setup`] with a one-rule approval policy whose CEL condition matches
/// every transfer (`input.amount > 0`): the cost of a policy per cycle. The
/// owner may answer (self-approval on), as the cycle's caller does.
pub fn setup_with_policy(store: Arc<dyn SessionStore>) -> holdpoint::Result<(Agent, TransferTool)> {
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        agent: Some("bankingAgent".into()),
        tool: Some("transferMoney".into()),
        when: Some("input.amount > 0".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: true,
        ..Default::default()
    }])
    .map_err(|e| holdpoint::Error::InvalidArgument(e.to_string()))?;
    let (builder, tool) = builder(store, true)?;
    Ok((builder.approval_policy(policy).build()?, tool))
}

/// The transfer tool: pauses for an approval, then moves the money.
pub fn transfer_tool() -> holdpoint::Result<TransferTool> {
    TransferTool::define(
        "transferMoney",
        "Transfers money; needs approval",
        |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
            match approval {
                None => {
                    Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                }
                Some(a) if a.approved => Ok(TransferResult {
                    success: true,
                    transaction_id: "txn-123".into(),
                }),
                Some(_) => Err(ctx.fail("declined")),
            }
        },
    )
}

/// The banking agent's builder; `reply`: the transfer declares its approval
/// reply (as a tool an approval rule covers does).
fn builder(
    store: Arc<dyn SessionStore>,
    reply: bool,
) -> holdpoint::Result<(holdpoint::agent::AgentBuilder, TransferTool)> {
    let tool = transfer_tool()?;
    let tool = if reply { tool.approval_reply()? } else { tool };
    let builder = Agent::builder("bankingAgent")
        .model(Arc::new(model()))
        .tool(tool.clone())
        .store(store);
    Ok((builder, tool))
}

/// The workload through one sub-agent level: `supportAgent` hands the
/// request to `bankingAgent` (as [`setup`] builds it) and relays its answer;
/// the transfer's hold surfaces on `supportAgent` and is answered there.
pub fn setup_subagent(store: Arc<dyn SessionStore>) -> holdpoint::Result<(Agent, TransferTool)> {
    let (banking, tool) = setup(Arc::clone(&store))?;
    let front = ScriptedModel::from_fn("scripted/bench-front", |request, _| {
        let last = request.messages.last()?;
        Some(if last.role == Role::Tool {
            let output = last.content.first()?.as_tool_response()?.output.clone()?;
            ScriptedTurn::text(output.as_str().unwrap_or("failed").to_owned())
        } else {
            ScriptedTurn::tool_call("bankingAgent", json!({"input": last.text()}))
        })
    })
    .without_recording();
    let agent = Agent::builder("supportAgent")
        .model(Arc::new(front))
        .subagent(banking)
        .store(store)
        .build()?;
    Ok((agent, tool))
}

/// [`setup`] under a one-rule approval policy with a quorum of two: each
/// hold is answered through `Decisions::answer` by two distinct approvers
/// with the `finance` role, the first approval recorded as partial (see
/// [`Driver::Answered`](crate::drive::Driver::Answered)). Self-approval is off (the sessions have no
/// owner, so it would not apply anyway).
pub fn setup_with_quorum(store: Arc<dyn SessionStore>) -> holdpoint::Result<(Agent, TransferTool)> {
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        agent: Some("bankingAgent".into()),
        tool: Some("transferMoney".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
        ..Default::default()
    }])
    .map_err(|e| holdpoint::Error::InvalidArgument(e.to_string()))?;
    let (builder, tool) = builder(store, true)?;
    Ok((builder.approval_policy(policy).build()?, tool))
}

/// Where .ci/run installs the reference MCP server's entry point.
pub const EVERYTHING_JS: &str =
    "/var/tmp/holdpoint-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The message the MCP cycle's model asks `everything_echo` to echo.
pub const ECHOED: &str = "Transfer $500 to savings";

/// The cycle with an MCP tool as the held call: the reference server
/// `@modelcontextprotocol/server-everything` started over stdio (`node
/// {server_js} stdio`), its `echo` tool (`everything_echo`) held by a
/// one-rule approval policy; the model calls it, an approver answers the
/// hold through `Decisions::answer`, the server echoes, and turn 2 reports the
/// echo. The server stays connected while the returned [`McpServer`](holdpoint_mcp::McpServer) lives.
pub async fn setup_mcp(
    store: Arc<dyn SessionStore>,
    server_js: &str,
) -> holdpoint::Result<(Agent, holdpoint_mcp::McpServer)> {
    let config = holdpoint_mcp::ServerConfig::stdio("everything", "node", [server_js, "stdio"]);
    let server = holdpoint_mcp::McpServer::connect(config)
        .await
        .map_err(|e| Error::Unavailable(format!("MCP server {server_js}: {e}")))?;
    let echo = server
        .tools()
        .into_iter()
        .find(|t| t.definition().name == "everything_echo")
        .ok_or_else(|| Error::Internal("the MCP server has no echo tool".into()))?;
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        tool: Some("everything_echo".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..Default::default()
    }])
    .map_err(|e| holdpoint::Error::InvalidArgument(e.to_string()))?;
    let model = ScriptedModel::from_fn("scripted/bench-mcp", |request, _| {
        let last = request.messages.last()?;
        Some(if last.role == Role::Tool {
            let output = last.content.first()?.as_tool_response()?.output.clone()?;
            ScriptedTurn::text(format!("Done: {}", output.as_str().unwrap_or("failed")))
        } else {
            ScriptedTurn::tool_call("everything_echo", json!({"message": ECHOED}))
        })
    })
    .without_recording();
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model))
        .tool(echo)
        .approval_policy(policy)
        .store(store)
        .build()?;
    Ok((agent, server))
}

/// The request context of an approver with the `finance` role.
pub(crate) fn approver(name: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut context = serde_json::Map::new();
    context.insert(holdpoint::agent::PRINCIPAL.into(), json!(name));
    context.insert(holdpoint::approval::ROLES.into(), json!(["finance"]));
    context
}

/// The call to answer for a paused call: itself, or for a hold a
/// sub-agent surfaced, the child's first paused call under its compound
/// ref (as listings show it).
pub(crate) fn answerable(part: Part) -> Part {
    let Some(hold) = holdpoint::agent::subagent::SurfacedHold::of(&part) else {
        return part;
    };
    let outer = part.ref_segment().unwrap_or_default();
    match hold.interrupts.into_iter().next() {
        Some(mut inner) => {
            let compound = format!(
                "{outer}{}{}",
                holdpoint::agent::subagent::REF_SEPARATOR,
                inner.ref_segment().unwrap_or_default()
            );
            if let Some(r) = inner.as_tool_request_mut() {
                r.reference = Some(compound);
            }
            answerable(inner)
        }
        None => part,
    }
}

pub(crate) fn check(ok: bool, what: &str) -> holdpoint::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Internal(format!("cycle check failed: {what}")))
    }
}
