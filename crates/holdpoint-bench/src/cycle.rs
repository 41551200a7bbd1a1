//! One approval cycle: new session → "Transfer $500 to savings" → the
//! transfer pauses → the caller claims and approves it by session id → the
//! tool runs → "Done: txn-123". Every step is checked.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::message::Role;
use holdpoint::session::{Observed, SessionStore, StoreObserver, StoreOp, observe};
use holdpoint::{Error, FinishReason, Part, ResumableTool, Resume, ScriptedModel, ScriptedTurn, ToolContext};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
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
    approved: bool,
}

impl holdpoint::approval::ApprovalReply for Approval {
    fn approve(_reason: Option<String>) -> Self {
        Approval { approved: true }
    }

    fn deny(_reason: Option<String>) -> Self {
        Approval { approved: false }
    }
}

#[derive(Deserialize)]
struct Details {
    details: String,
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
/// hold is answered through `Agent::answer` by two distinct approvers
/// with the `finance` role, the first approval recorded as partial (see
/// [`Driver::Answered`]). Self-approval is off (the sessions have no
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
/// hold through `Agent::answer`, the server echoes, and turn 2 reports the
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
fn approver(name: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut context = serde_json::Map::new();
    context.insert(holdpoint::agent::PRINCIPAL.into(), json!(name));
    context.insert(holdpoint::approval::ROLES.into(), json!(["finance"]));
    context
}

/// The call to answer for a paused call: itself, or for a hold a
/// sub-agent surfaced, the child's first paused call under its compound
/// ref (as listings show it).
fn answerable(part: Part) -> Part {
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

fn check(ok: bool, what: &str) -> holdpoint::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Internal(format!("cycle check failed: {what}")))
    }
}

/// A session paused at the transfer, ready to approve.
pub struct Paused {
    pub session_id: String,
    /// The held snapshot (empty over HTTP, which resumes by session).
    pub snapshot_id: String,
    pub part: Part,
}

/// What drives the cycle: the agent in-process, or the server over
/// loopback HTTP with a keep-alive pool (resuming by session id, as a later
/// request would).
#[derive(Clone)]
pub enum Driver {
    /// `Agent::run` directly.
    Direct(Agent),
    /// `POST {uri}` (`/agents/bankingAgent` on a local server).
    Http(HttpClient),
    /// `Agent::run`, each hold answered through `Agent::answer` by these
    /// approvers in turn (principals with the `finance` role): every answer
    /// but the last must be recorded as a partial approval, the last must
    /// resume the session to the text `expect`.
    Answered(Answerers),
}

/// The agent and approvers of [`Driver::Answered`].
#[derive(Clone)]
pub struct Answerers {
    agent: Agent,
    approvers: Vec<&'static str>,
    expect: String,
}

impl Answerers {
    /// `approvers` answer each hold of `agent`; the resumed turn must say
    /// `expect`.
    pub fn new(agent: Agent, approvers: Vec<&'static str>, expect: impl Into<String>) -> Self {
        Answerers {
            agent,
            approvers,
            expect: expect.into(),
        }
    }
}

/// The HTTP side of the bench: hyper's client with a keep-alive pool, and
/// the one URI it posts to. Plain hyper rather than reqwest: reqwest parses
/// the URL again for its redirect policy on every request (twice), about a
/// twentieth of the whole run's instructions, on the cores the server
/// under test shares with it.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: http::Uri,
}

impl HttpClient {
    /// A client for `uri` keeping up to `pool` idle connections.
    pub fn new(uri: http::Uri, pool: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(pool)
            .build(connector);
        HttpClient { client, uri }
    }

    /// Posts `body` as JSON; the response's body when its status is 2xx.
    async fn post(&self, body: Vec<u8>) -> holdpoint::Result<Bytes> {
        let uri = &self.uri;
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Internal(format!("POST {uri}: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Error::Unavailable(format!("POST {uri}: {e}")))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::Unavailable(format!("POST {uri}: {e}")))?
            .to_bytes();
        if !status.is_success() {
            return Err(Error::Internal(format!(
                "POST {uri}: {status}: {}",
                String::from_utf8_lossy(&bytes)
            )));
        }
        Ok(bytes)
    }
}

/// The body of `POST /agents/{name}`.
#[derive(Serialize)]
struct RunRequest<'a> {
    data: &'a AgentInput,
    init: &'a AgentInit,
}

impl Driver {
    async fn turn(&self, input: AgentInput, init: AgentInit) -> holdpoint::Result<AgentOutput> {
        match self {
            Driver::Direct(agent) | Driver::Answered(Answerers { agent, .. }) => agent.run(input, init).await,
            Driver::Http(http) => {
                let body = serde_json::to_vec(&RunRequest {
                    data: &input,
                    init: &init,
                })
                .map_err(|e| Error::Internal(format!("encode request: {e}")))?;
                let bytes = http.post(body).await?;
                let envelope: ResultEnvelope =
                    serde_json::from_slice(&bytes).map_err(|e| Error::Internal(format!("decode response: {e}")))?;
                Ok(envelope.result)
            }
        }
    }

    /// Starts a session and runs it to the pause.
    pub async fn pause(&self) -> holdpoint::Result<Paused> {
        let out = self.turn(AgentInput::text(REQUEST), AgentInit::new()).await?;
        check(out.finish_reason == FinishReason::Interrupted, "turn 1 pauses")?;
        let part = out
            .interrupts()
            .into_iter()
            .next()
            .ok_or_else(|| Error::Internal("no interrupt".into()))?;
        Ok(Paused {
            session_id: out.session_id,
            snapshot_id: out.snapshot_id.unwrap_or_default(),
            part: answerable(part),
        })
    }

    /// Reads a paused session's waiting call back from the agent by the
    /// session id alone, as an approval screen does; `None` over HTTP (the
    /// caller keeps the part it got).
    pub async fn reload(&self, session_id: String) -> holdpoint::Result<Option<Paused>> {
        let agent = match self {
            Driver::Direct(agent) | Driver::Answered(Answerers { agent, .. }) => agent,
            Driver::Http(_) => return Ok(None),
        };
        let snapshot = agent
            .latest_snapshot(&session_id, holdpoint::agent::Access::Full)
            .await?
            .ok_or_else(|| Error::Internal(format!("session {session_id} not found")))?;
        let part = snapshot
            .state
            .as_ref()
            .and_then(|s| s.messages.iter().rev().find(|m| m.role == Role::Model))
            .and_then(|m| m.interrupts().next().cloned())
            .ok_or_else(|| Error::Internal(format!("session {session_id} is not waiting")))?;
        Ok(Some(Paused {
            session_id,
            snapshot_id: snapshot.snapshot_id.clone(),
            part: answerable(part),
        }))
    }

    /// Claims and approves a paused session by its id; returns the resume
    /// latency.
    pub async fn approve(&self, tool: &TransferTool, paused: Paused) -> holdpoint::Result<Duration> {
        if let Driver::Answered(answerers) = self {
            return answerers.answer(paused).await;
        }
        let call = tool
            .interrupted(&paused.part)
            .ok_or_else(|| Error::Internal("claim refused".into()))?;
        let details: Details = call.interrupt_as()?;
        check(details.details == "Transfer $500.00 to savings", "interrupt payload")?;
        let directive = call.restart(Some(Approval { approved: true }))?;
        let started = Instant::now();
        let done = self
            .turn(
                AgentInput::resume(Resume::from_parts([directive])),
                AgentInit::session(paused.session_id),
            )
            .await?;
        let latency = started.elapsed();
        check(done.finish_reason == FinishReason::Stop, "turn 2 finishes")?;
        check(done.text() == "Done: txn-123", "tool result and final text")?;
        Ok(latency)
    }
}

impl Answerers {
    /// Answers `paused` as each approver in turn; the latency from the
    /// first answer to the resumed turn's end.
    async fn answer(&self, paused: Paused) -> holdpoint::Result<Duration> {
        use holdpoint::agent::{Answer, Answered};
        let started = Instant::now();
        let (last, partial) = self
            .approvers
            .split_last()
            .ok_or_else(|| Error::Internal("no approvers".into()))?;
        for (n, who) in partial.iter().enumerate() {
            let answered = self
                .agent
                .answer(Answer::approve(&paused.snapshot_id), approver(who))
                .await?;
            let Answered::Recorded { call, counted } = answered else {
                return Err(Error::Internal(format!(
                    "cycle check failed: approval {} resumed early",
                    n + 1
                )));
            };
            check(
                counted && call.approvals.len() == n + 1,
                "the partial approval is recorded",
            )?;
        }
        let answered = self
            .agent
            .answer(Answer::approve(&paused.snapshot_id), approver(last))
            .await?;
        let latency = started.elapsed();
        let Answered::Resumed(done) = answered else {
            return Err(Error::Internal("cycle check failed: the last approval resumes".into()));
        };
        check(done.finish_reason == FinishReason::Stop, "turn 2 finishes")?;
        check(done.text() == self.expect, "tool result and final text")?;
        Ok(latency)
    }
}

#[derive(Deserialize)]
struct ResultEnvelope {
    result: AgentOutput,
}
