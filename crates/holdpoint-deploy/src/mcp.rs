//! The file's MCP servers (`[[mcp.servers]]`): connected before the agents
//! are built, so their tools join the agents the entries name.

use std::sync::Arc;

use holdpoint::Tool;
use holdpoint_mcp::McpServers;

use crate::config::Config;
use crate::error::DeployError;

/// Connects the file's MCP servers (`None` when it names none). A server
/// that cannot be reached stops the start.
pub async fn mcp_servers(config: &Config) -> Result<Option<McpServers>, DeployError> {
    let entries = config.mcp_servers();
    if entries.is_empty() {
        return Ok(None);
    }
    McpServers::connect(entries.iter().cloned())
        .await
        .map(Some)
        .map_err(|source| DeployError::Mcp {
            file: config.file().to_owned(),
            source,
        })
}

/// The tools `agent` gets from the connected MCP servers.
pub fn mcp_tools(servers: Option<&McpServers>, agent: &str) -> Vec<Arc<dyn Tool>> {
    servers.map(|s| s.tools_for(agent)).unwrap_or_default()
}
