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

mod call;
mod connection;

pub(crate) use call::{Held, LiveCall, Question, Reply};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use holdpoint::tool::SchemaValidator;
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use crate::config::{ServerConfig, Transport};
use crate::error::McpError;
use connection::ConnState;

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

    /// The tools as the server last listed them.
    pub(crate) fn listed_tools(&self) -> Vec<ListedTool> {
        self.tools.read().unwrap_or_else(PoisonError::into_inner).clone()
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
