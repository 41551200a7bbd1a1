//! `holdpoint mcp list`: the `[[mcp.servers]]` of a configuration file,
//! connected one by one, with their status and tools.
//!
//! The file is read by the deployment's own loader
//! ([`holdpoint_deploy::Config::load`]), so a file this command accepts is
//! one `serve --config` accepts: the whole file is checked, and a mistake
//! anywhere in it is named by file, line and key.

use std::path::Path;

use holdpoint_deploy::Config;
use holdpoint_mcp::{McpServer, ServerStatus};

use crate::error::CliError;
use crate::output::{Table, print, print_json};

/// Connects to every server of the `--config` file (a failure is that
/// server's status, not the command's) and prints them; without a file,
/// a usage error.
pub async fn list(path: Option<&Path>, json: bool) -> Result<(), CliError> {
    let path = path.ok_or_else(|| {
        CliError::Usage("mcp list needs the configuration file: --config FILE (or HOLDPOINT_CONFIG)".into())
    })?;
    let configs = Config::load(path)?.mcp_servers().to_vec();
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
