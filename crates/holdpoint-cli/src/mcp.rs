//! `holdpoint mcp list`: the `[[mcp.servers]]` of a configuration file,
//! connected one by one, with their status and tools.

use std::path::Path;

use holdpoint_mcp::{McpServer, ServerConfig, ServerStatus};
use serde::Deserialize;

use crate::error::CliError;
use crate::output::{Table, print, print_json};

/// The part of a configuration file this command reads; other tables are
/// ignored.
#[derive(Deserialize)]
struct File {
    #[serde(default)]
    mcp: Option<Section>,
}

#[derive(Deserialize)]
struct Section {
    #[serde(default)]
    servers: Vec<ServerConfig>,
}

/// The servers of the file at `path`, checked.
fn servers(path: &Path) -> Result<Vec<ServerConfig>, CliError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let file: File = toml::from_str(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let servers = file.mcp.map(|m| m.servers).unwrap_or_default();
    for (i, s) in servers.iter().enumerate() {
        s.transport()
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
        if servers[..i].iter().any(|o| o.name == s.name) {
            return Err(CliError::Usage(format!(
                "{}: two [[mcp.servers]] are named \"{}\"",
                path.display(),
                s.name
            )));
        }
    }
    Ok(servers)
}

/// Connects to every server of the file (a failure is that server's
/// status, not the command's) and prints them.
pub async fn list(path: &Path, json: bool) -> Result<(), CliError> {
    let configs = servers(path)?;
    let mut statuses: Vec<ServerStatus> = Vec::with_capacity(configs.len());
    for config in configs {
        let server = McpServer::new(config).map_err(|e| CliError::Usage(e.to_string()))?;
        let _ = server.reconnect().await;
        statuses.push(server.status().await);
        server.close().await;
    }
    if json {
        return Ok(print_json(&statuses)?);
    }
    let mut t = Table::new(vec!["SERVER", "TRANSPORT", "STATUS", "PROTOCOL", "TOOLS"]);
    for s in &statuses {
        let status = match &s.last_error {
            Some(e) if s.status != "connected" => format!("{} ({e})", s.status),
            _ => s.status.to_owned(),
        };
        t.row(vec![
            s.name.clone(),
            s.transport.to_owned(),
            status,
            s.protocol_version.clone().unwrap_or_else(|| "-".into()),
            if s.tools.is_empty() {
                "-".into()
            } else {
                s.tools.join(", ")
            },
        ]);
    }
    Ok(print(&t.render("no [[mcp.servers]] in the file"))?)
}
