//! The connection to the server: started (a stdio child or Streamable
//! HTTP), re-established within the restart policy, and the client handler
//! that answers the server's requests.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};

use rmcp::model::{ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, Implementation};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use super::Shared;
use crate::config::Transport;
use crate::error::McpError;

pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Handler>,
    pub(super) pid: Option<u32>,
}

impl Connection {
    pub(super) fn alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }
}

#[derive(Default)]
pub(super) struct ConnState {
    pub(super) current: Option<Arc<Connection>>,
    attempts: u64,
}

impl Shared {
    /// The open connection, (re-)established when there is none or it died,
    /// within the restart policy.
    pub(super) async fn connection(self: &Arc<Self>) -> Result<Arc<Connection>, McpError> {
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
                cmd.args(args).envs(env.iter().map(|(k, v)| (k, v.expose())));
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
                    config = config.auth_header(token.expose().to_owned());
                }
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let (Ok(k), Ok(v)) = (
                        http::HeaderName::from_bytes(k.as_bytes()),
                        http::HeaderValue::from_str(v.expose()),
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
pub(super) struct Handler {
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
