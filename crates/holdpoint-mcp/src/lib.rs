//! MCP servers' tools as Holdpoint tools (docs/reference.md §17).
//!
//! [`McpServer::connect`] starts a stdio server (or reaches a Streamable
//! HTTP one), negotiates capabilities (Holdpoint offers form and URL
//! elicitation) and lists its tools; [`McpServer::tools`] gives them as
//! [`holdpoint::Tool`]s named `{server}_{tool}`. Their definitions carry
//! `metadata.mcp = {server, tool, title?, annotations}` for approval rules.
//! A server's question during a call (`elicitation/create`) holds the call
//! with an interrupt; the resume that answers it sends the answer to the
//! still-open request. A stateless `input_required` result is a hold the
//! resume answers by calling again with the answers.
//!
//! ```no_run
//! # async fn f() -> Result<(), holdpoint_mcp::McpError> {
//! use holdpoint_mcp::{McpServer, ServerConfig};
//! let everything = McpServer::connect(ServerConfig::stdio("everything", "npx", ["-y", "@modelcontextprotocol/server-everything"])).await?;
//! let tools = everything.tools(); // everything_echo, …
//! # let _ = tools; Ok(()) }
//! ```

mod answer;
mod client;
mod config;
mod error;
mod tool;

pub use answer::{Answer, Answers, ELICITATION, INPUT_REQUIRED, MCP_KEY};
pub use client::{McpServer, ServerStatus};
pub use config::{DEFAULT_TOOL_NAMES, ServerConfig, Transport};
pub use error::McpError;
pub use holdpoint_secret::Secret;
pub use tool::{METADATA_KEY, McpTool, hint, is_read_only, may_destroy, mcp_metadata};

use std::sync::Arc;

use holdpoint::Tool;

/// Several servers, as a `[[mcp.servers]]` list configures them.
#[derive(Debug, Clone, Default)]
pub struct McpServers {
    servers: Vec<McpServer>,
}

impl McpServers {
    /// Connects every server, in order; names must be unique. A server
    /// that cannot be reached fails the whole set.
    pub async fn connect(configs: impl IntoIterator<Item = ServerConfig>) -> Result<McpServers, McpError> {
        let mut servers: Vec<McpServer> = Vec::new();
        for config in configs {
            if servers.iter().any(|s| s.name() == config.name) {
                return Err(McpError::Config {
                    server: config.name,
                    message: "two servers have this name".into(),
                });
            }
            servers.push(McpServer::connect(config).await?);
        }
        Ok(McpServers { servers })
    }

    /// The servers.
    pub fn servers(&self) -> &[McpServer] {
        &self.servers
    }

    /// The tools of the servers that serve `agent` (their `agents` list
    /// names it, or they have none).
    pub fn tools_for(&self, agent: &str) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .filter(|s| s.config().serves(agent))
            .flat_map(McpServer::tools)
            .collect()
    }

    /// Every server's status.
    pub async fn statuses(&self) -> Vec<ServerStatus> {
        let mut out = Vec::with_capacity(self.servers.len());
        for s in &self.servers {
            out.push(s.status().await);
        }
        out
    }

    /// Closes every server (stdio children end; open calls fail).
    pub async fn close(&self) {
        for s in &self.servers {
            s.close().await;
        }
    }
}
