//! One MCP server: its connection (re-established within the restart
//! policy), its tool list (refreshed on `notifications/tools/list_changed`),
//! the calls in flight and the calls held on the server's question.
//!
//! Invariants: a call is in `inflight` from before its request is sent
//! until its [`LiveCall`] is dropped (finished, timed out, cancelled or
//! abandoned), so a server's question is only ever routed to a call that
//! is still open; a question is routed only when exactly one call of this
//! server is open — with several open there is no telling whose it is
//! (stdio carries no link from a request to the call it belongs to), and
//! the server is told `cancel` rather than risking a question reaching
//! another session. A held call lives in `held` until it is answered,
//! expires, or the process ends.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Instant;

use holdpoint::Tool;
use holdpoint::tool::SchemaValidator;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    Implementation,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, Peer, RoleClient};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::{ServerConfig, Transport};
use crate::error::McpError;
use crate::tool::McpTool;

/// A tool as the server lists it, with its compiled input schema.
#[derive(Debug, Clone)]
pub(crate) struct ListedTool {
    /// The tool as the server sent it (`name`, `inputSchema`, `annotations`, …).
    pub raw: Map<String, Value>,
    pub input: SchemaValidator,
    pub output: Option<SchemaValidator>,
}

impl ListedTool {
    fn new(raw: Map<String, Value>) -> Self {
        let input = SchemaValidator::new(
            raw.get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"})),
        );
        let output = raw
            .get("outputSchema")
            .filter(|s| s.is_object())
            .cloned()
            .map(SchemaValidator::new);
        ListedTool { raw, input, output }
    }

    pub fn name(&self) -> &str {
        self.raw.get("name").and_then(Value::as_str).unwrap_or_default()
    }
}

/// A server's question, routed to the open call it belongs to.
pub(crate) struct Question {
    /// The `elicitation/create` params (`mode`, `message`, `requestedSchema` or `url`).
    pub params: Value,
    /// Where the `ElicitResult` goes; dropping it answers `cancel`.
    pub reply: oneshot::Sender<Value>,
}

/// What a `tools/call` came back with.
pub(crate) enum Reply {
    /// A `CallToolResult`, as JSON.
    Complete(Value),
    /// An `InputRequiredResult` (2026-07-28), as JSON.
    InputRequired(Value),
}

/// One open `tools/call`. Dropping it abandons the request (the server is
/// sent `notifications/cancelled`) and takes it out of `inflight`.
pub(crate) struct LiveCall {
    seq: u64,
    shared: Weak<Shared>,
    pub tool: String,
    pub done: oneshot::Receiver<Result<Reply, String>>,
    pub questions: mpsc::Receiver<Question>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(shared) = self.shared.upgrade() {
            shared.inflight().remove(&self.seq);
        }
    }
}

/// A call held on the server's question, waiting for a resume.
pub(crate) struct Held {
    pub call: LiveCall,
    pub reply: oneshot::Sender<Value>,
    /// The interrupt data the call paused with.
    pub data: Map<String, Value>,
    pub since: Instant,
}

struct Connection {
    service: RunningService<RoleClient, Handler>,
    pid: Option<u32>,
}

impl Connection {
    fn alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

#[derive(Default)]
struct ConnState {
    current: Option<Arc<Connection>>,
    attempts: u64,
}

pub(crate) struct Shared {
    pub config: ServerConfig,
    transport: Transport,
    conn: tokio::sync::Mutex<ConnState>,
    tools: RwLock<Vec<ListedTool>>,
    tools_version: watch::Sender<u64>,
    inflight: Mutex<HashMap<u64, mpsc::Sender<Question>>>,
    next_seq: AtomicU64,
    held: Mutex<HashMap<String, Held>>,
    /// Connections re-established since the last call that succeeded.
    restarts: AtomicU32,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::Sender<Question>>> {
        self.inflight.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn tool(&self, name: &str) -> Option<ListedTool> {
        self.tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|t| t.name() == name)
            .cloned()
    }

    fn set_error(&self, e: &McpError) {
        *self.last_error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
    }

    pub(crate) fn call_succeeded(&self) {
        self.restarts.store(0, Ordering::Relaxed);
    }

    fn request_error(&self, message: impl Into<String>) -> McpError {
        McpError::Request {
            server: self.config.name.clone(),
            message: message.into(),
        }
    }

    /// The open connection, (re-)established when there is none or it died,
    /// within the restart policy.
    async fn connection(self: &Arc<Self>) -> Result<Arc<Connection>, McpError> {
        let mut state = self.conn.lock().await;
        if let Some(c) = &state.current
            && c.alive()
        {
            return Ok(Arc::clone(c));
        }
        if state.current.take().is_some() || state.attempts > 0 {
            let restarts = self.restarts.load(Ordering::Relaxed);
            if restarts >= self.config.restarts_allowed() {
                let last = self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .unwrap_or_else(|| "the connection closed".into());
                return Err(McpError::GaveUp {
                    server: self.config.name.clone(),
                    restarts,
                    last,
                });
            }
            self.restarts.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(server = %self.config.name, restart = restarts + 1, "re-establishing the MCP connection");
        }
        state.attempts += 1;
        match self.connect().await {
            Ok(c) => {
                let c = Arc::new(c);
                state.current = Some(Arc::clone(&c));
                drop(state);
                if let Err(e) = self.refresh_with(c.service.peer()).await {
                    self.set_error(&e);
                    return Err(e);
                }
                Ok(c)
            }
            Err(e) => {
                self.set_error(&e);
                Err(e)
            }
        }
    }

    async fn connect(self: &Arc<Self>) -> Result<Connection, McpError> {
        let handler = Handler {
            shared: Arc::downgrade(self),
        };
        let name = self.config.name.clone();
        let limit = self.config.connect_timeout();
        let connect_error = |e: &dyn std::fmt::Display| McpError::Connect {
            server: name.clone(),
            message: e.to_string(),
        };
        let timed_out = || McpError::ConnectTimeout {
            server: name.clone(),
            timeout: limit,
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let (process, stderr) =
                    TokioChildProcess::builder(cmd)
                        .stderr(Stdio::piped())
                        .spawn()
                        .map_err(|source| McpError::Spawn {
                            server: name.clone(),
                            command: command.clone(),
                            source,
                        })?;
                let pid = process.id();
                if let Some(stderr) = stderr {
                    let server = name.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %server, "{line}");
                        }
                    });
                }
                let service = tokio::time::timeout(limit, handler.serve_with_lifecycle(process, lifecycle()))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| connect_error(&e))?;
                Ok(Connection { service, pid })
            }
            Transport::Http {
                url,
                headers,
                bearer_token,
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer_token {
                    config = config.auth_header(token.clone());
                }
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let (Ok(k), Ok(v)) = (
                        http::HeaderName::from_bytes(k.as_bytes()),
                        http::HeaderValue::from_str(v),
                    ) else {
                        return Err(connect_error(&format!("header \"{k}\" is not a valid HTTP header")));
                    };
                    custom.insert(k, v);
                }
                let transport = StreamableHttpClientTransport::from_config(config.custom_headers(custom));
                let service = tokio::time::timeout(limit, handler.serve_with_lifecycle(transport, lifecycle()))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| connect_error(&e))?;
                Ok(Connection { service, pid: None })
            }
        }
    }

    async fn refresh_with(&self, peer: &Peer<RoleClient>) -> Result<(), McpError> {
        let listed = tokio::time::timeout(self.config.call_timeout(), peer.list_all_tools())
            .await
            .map_err(|_| self.request_error("tools/list timed out"))?
            .map_err(|e| self.request_error(format!("tools/list failed: {e}")))?;
        let mut tools = Vec::with_capacity(listed.len());
        for t in listed {
            match serde_json::to_value(&t) {
                Ok(Value::Object(raw)) => tools.push(ListedTool::new(raw)),
                _ => {
                    tracing::warn!(server = %self.config.name, tool = %t.name, "a listed tool does not serialise; skipped")
                }
            }
        }
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = tools;
        self.tools_version.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Sends `tools/call` and returns the open call.
    pub(crate) async fn start_call(
        self: &Arc<Self>,
        tool: &str,
        arguments: Map<String, Value>,
        retry: Option<(Value, Option<String>)>,
    ) -> Result<LiveCall, McpError> {
        self.sweep_held();
        let conn = self.connection().await?;
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some((responses, state)) = retry {
            params["inputResponses"] = responses;
            if let Some(state) = state {
                params["requestState"] = Value::String(state);
            }
        }
        let params: CallToolRequestParams = serde_json::from_value(params)
            .map_err(|e| self.request_error(format!("cannot build the tools/call request: {e}")))?;
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let (qtx, questions) = mpsc::channel(1);
        self.inflight().insert(seq, qtx);
        let (dtx, done) = oneshot::channel();
        let peer = conn.service.peer().clone();
        let server = self.config.name.clone();
        let task = tokio::spawn(async move {
            // Holding the connection keeps the service (and its process)
            // up for as long as the call is open.
            let _conn = conn;
            let reply = match peer.call_tool_once(params).await {
                Ok(CallToolResponse::Complete(r)) => {
                    serde_json::to_value(&r).map(Reply::Complete).map_err(|e| e.to_string())
                }
                Ok(CallToolResponse::InputRequired(r)) => serde_json::to_value(&r)
                    .map(Reply::InputRequired)
                    .map_err(|e| e.to_string()),
                Ok(_) => Err("the server answered with a task, which Holdpoint does not poll".to_owned()),
                Err(rmcp::ServiceError::TransportClosed) => Err(format!(
                    "MCP server \"{server}\" closed the connection during the call; its outcome is unknown"
                )),
                Err(e) => Err(format!("MCP server \"{server}\": {e}")),
            };
            let _ = dtx.send(reply);
        });
        Ok(LiveCall {
            seq,
            shared: Arc::downgrade(self),
            tool: tool.to_owned(),
            done,
            questions,
            task,
        })
    }

    /// Routes a server's question to the one open call, and waits for its
    /// answer (`cancel` when there is no single open call, when the held
    /// call is dropped, or after the elicitation timeout).
    async fn route_question(&self, params: Value) -> Value {
        let cancel = json!({"action": "cancel"});
        let target = {
            let open = self.inflight();
            if open.len() == 1 {
                open.values().next().cloned()
            } else {
                None
            }
        };
        let Some(target) = target else {
            tracing::warn!(
                server = %self.config.name,
                "the server asked a question while no single call of it was open; answered cancel"
            );
            return cancel;
        };
        let (reply, answer) = oneshot::channel();
        if target.send(Question { params, reply }).await.is_err() {
            return cancel;
        }
        match tokio::time::timeout(self.config.elicitation_timeout(), answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => cancel,
            Err(_) => {
                tracing::warn!(server = %self.config.name, "a question of the server was not answered in time; answered cancel");
                cancel
            }
        }
    }

    /// Drops held calls whose question is closed (answered `cancel` on
    /// timeout) and that waited longer than the elicitation timeout.
    pub(crate) fn sweep_held(&self) {
        let limit = self.config.elicitation_timeout();
        self.held()
            .retain(|_, h| !(h.reply.is_closed() && h.since.elapsed() > limit));
    }
}

/// How a connection starts: `server/discover` for the 2026-07-28 revision
/// (stateless `input_required` results need it), falling back to the
/// `initialize` handshake for servers that report they are older.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

/// The client side of the connection: answers the server's requests.
struct Handler {
    shared: Weak<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}, "url": {}}})).unwrap_or_default();
        ClientConfig::new(
            capabilities,
            Implementation::new("holdpoint", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let answer = match (self.shared.upgrade(), serde_json::to_value(&request)) {
            (Some(shared), Ok(params)) => shared.route_question(params).await,
            _ => json!({"action": "cancel"}),
        };
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(shared) = self.shared.upgrade() else { return };
        let peer = context.peer.clone();
        tokio::spawn(async move {
            if let Err(e) = shared.refresh_with(&peer).await {
                tracing::warn!(server = %shared.config.name, error = %e, "could not refresh the tool list");
            }
        });
    }
}

/// What `holdpoint mcp list` shows of one server.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// `connected`, `disconnected` or `failed`.
    pub status: &'static str,
    /// The negotiated protocol version, when connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The server's name and version, as it reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// The process id of a stdio server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Connections re-established since the last successful call.
    pub restarts: u32,
    /// The last connection error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The Holdpoint names of its tools, sorted.
    pub tools: Vec<String>,
    /// Calls held on the server's question.
    pub held: usize,
}

/// A connected MCP server whose tools are Holdpoint tools.
///
/// Cloning shares the connection. Dropping the last clone closes it (a
/// stdio server's process is killed).
#[derive(Clone)]
pub struct McpServer {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.shared.config.name)
            .finish()
    }
}

impl McpServer {
    /// Checks `config`, connects (starting a stdio server's process),
    /// negotiates capabilities and lists the tools.
    pub async fn connect(config: ServerConfig) -> Result<McpServer, McpError> {
        let server = McpServer::new(config)?;
        server.shared.connection().await?;
        Ok(server)
    }

    /// Checks `config` without connecting; the first call (or
    /// [`reconnect`](Self::reconnect)) connects.
    pub fn new(config: ServerConfig) -> Result<McpServer, McpError> {
        let transport = config.transport()?;
        let (tools_version, _) = watch::channel(0);
        Ok(McpServer {
            shared: Arc::new(Shared {
                config,
                transport,
                conn: tokio::sync::Mutex::default(),
                tools: RwLock::default(),
                tools_version,
                inflight: Mutex::default(),
                next_seq: AtomicU64::new(0),
                held: Mutex::default(),
                restarts: AtomicU32::new(0),
                last_error: Mutex::default(),
            }),
        })
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// Connects if there is no live connection (within the restart policy).
    pub async fn reconnect(&self) -> Result<(), McpError> {
        self.shared.connection().await.map(|_| ())
    }

    /// The server's tools as Holdpoint tools, named by the server's
    /// `tool_names` template, as the server last listed them.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let listed = self.shared.tools.read().unwrap_or_else(PoisonError::into_inner).clone();
        listed
            .iter()
            .map(|t| Arc::new(McpTool::new(Arc::clone(&self.shared), t)) as Arc<dyn Tool>)
            .collect()
    }

    /// The MCP names of the listed tools.
    pub fn tool_names(&self) -> Vec<String> {
        self.shared
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// Lists the tools again.
    pub async fn refresh_tools(&self) -> Result<(), McpError> {
        let conn = self.shared.connection().await?;
        self.shared.refresh_with(conn.service.peer()).await
    }

    /// A receiver that changes whenever the tool list was (re)loaded.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.tools_version.subscribe()
    }

    /// The process id of a stdio server's current process.
    pub async fn pid(&self) -> Option<u32> {
        self.shared.conn.lock().await.current.as_ref().and_then(|c| c.pid)
    }

    /// The number of `tools/call` requests of this server still open
    /// (running or held).
    pub fn open_calls(&self) -> usize {
        self.shared.inflight().len()
    }

    /// The number of calls held on the server's question in this process.
    pub fn held_calls(&self) -> usize {
        self.shared.held().len()
    }

    /// What `holdpoint mcp list` shows.
    pub async fn status(&self) -> ServerStatus {
        let state = self.shared.conn.lock().await;
        let conn = state.current.as_ref().filter(|c| c.alive());
        let info = conn.and_then(|c| c.service.peer().peer_info());
        let last_error = self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut tools: Vec<String> = self
            .tool_names()
            .iter()
            .map(|t| self.shared.config.tool_name(t))
            .collect();
        tools.sort();
        ServerStatus {
            name: self.shared.config.name.clone(),
            transport: self.shared.transport.kind(),
            status: match (conn, &last_error) {
                (Some(_), _) => "connected",
                (None, Some(_)) => "failed",
                (None, None) => "disconnected",
            },
            protocol_version: info.as_ref().map(|i| i.protocol_version.to_string()),
            server_info: info
                .as_ref()
                .and_then(|i| i.server_info.as_ref())
                .map(|s| format!("{} {}", s.name, s.version)),
            pid: conn.and_then(|c| c.pid),
            restarts: self.shared.restarts.load(Ordering::Relaxed),
            last_error,
            tools,
            held: self.held_calls(),
        }
    }

    /// Closes the connection (a stdio server's process ends). Calls held on
    /// a question are dropped: their resumes find them in doubt.
    pub async fn close(&self) {
        self.shared.held().clear();
        let current = self.shared.conn.lock().await.current.take();
        if let Some(c) = current
            && let Ok(mut c) = Arc::try_unwrap(c)
        {
            let _ = c.service.close().await;
        }
    }
}
