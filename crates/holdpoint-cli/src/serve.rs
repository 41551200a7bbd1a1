//! `holdpoint serve`: the given agents over HTTP, configured by flags and
//! the `--config` file (docs/reference.md §15).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use holdpoint::agent::Agent;
use holdpoint_deploy::{Config, ServerFlags, Serving};
use holdpoint_server::Server;

use crate::args::ServeArgs;
use crate::error::CliError;
use crate::output::print;

/// Refuses a configuration whose approval rules or MCP servers cannot
/// reach agents that were built already: a rule that is configured must be
/// enforced, never silently dropped. Agents built with
/// `.approval_policy(config.approval_policy())` (and the MCP tools of
/// [`holdpoint_deploy::mcp_servers`]) serve as given.
fn check_prebuilt(agents: &[Agent], config: &Config) -> Result<(), CliError> {
    let path = config.file().display();
    if !config.approval_rules().is_empty() && agents.iter().any(|a| !a.has_approval_policy()) {
        return Err(CliError::Usage(format!(
            "{path}: [[approval.rules]] cannot be added to agents built already: build them with `.approval_policy(Config::load(..)?.approval_policy())` before handing them to holdpoint_cli::run"
        )));
    }
    // An MCP server counts as applied when some agent has a tool of it
    // (its definition's `metadata.mcp.server`).
    let served_by_tools = |name: &str| {
        agents.iter().any(|a| {
            a.tool_definitions().iter().any(|d| {
                d.metadata
                    .as_ref()
                    .and_then(|m| m.get("mcp"))
                    .and_then(|m| m.get("server"))
                    .and_then(serde_json::Value::as_str)
                    == Some(name)
            })
        })
    };
    if let Some(missing) = config.mcp_servers().iter().find(|m| !served_by_tools(&m.name)) {
        return Err(CliError::Usage(format!(
            "{path}: [[mcp.servers]] {:?} cannot add tools to agents built already: add `holdpoint_deploy::mcp_tools(..)` to their builders (banking serve does)",
            missing.name
        )));
    }
    Ok(())
}

/// Binds `addr`, a busy port explained.
async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, CliError> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            CliError::Usage(format!(
                "{addr} is already in use: pick another port with --addr 127.0.0.1:PORT"
            ))
        } else {
            CliError::Io(e)
        }
    })
}

pub(crate) async fn serve(
    args: ServeArgs,
    config: Option<&Path>,
    api_key: Option<String>,
    agents: Vec<Agent>,
) -> Result<(), CliError> {
    if agents.is_empty() {
        return Err(CliError::Usage(
            "the stock holdpoint binary has no agents to serve: call holdpoint_cli::run(agents) from your own main (see the holdpoint-cli docs)".into(),
        ));
    }
    let config = config.map(Config::load).transpose()?;
    let serving = Serving::resolve(
        ServerFlags {
            addr: args.addr,
            data_dir: args.data_dir,
            metrics_open: args.metrics_open,
            allowed_hosts: args.allowed_hosts,
        },
        config.as_ref(),
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let addr = serving.listen;
    let api_key = api_key.filter(|k| !k.is_empty());
    serving
        .check_exposure(api_key.as_deref(), config.as_ref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if config.as_ref().is_some_and(|c| c.server().store.is_some()) {
        eprintln!("note: `[server] store` is not used by serve here: the agents use the stores they were built with");
    }
    if let Some(c) = &config {
        check_prebuilt(&agents, c)?;
    }
    // Notifications run over the first agent's store (the agents of one
    // deployment share it); expiry timers are answered by the agent that
    // holds the call.
    let metrics = holdpoint_server::Metrics::new();
    let outbox = agents.iter().find_map(|a| a.store().cloned());
    let notifications = match (&config, &outbox) {
        (Some(c), Some(store)) => {
            holdpoint_deploy::start_notifications(c, Arc::clone(store), agents.clone(), &metrics)?
        }
        _ => None,
    };
    let mut builder = serving.apply(Server::builder().agents(agents).metrics(metrics));
    // Operators (the `operator` role) see the outbox at /notifications.
    if let Some(store) = outbox.filter(|_| notifications.is_some()) {
        builder = builder.notifications(store);
    }
    let (builder, authenticated) = holdpoint_deploy::authenticate(builder, config.as_ref(), api_key.as_deref()).await?;
    let server = builder.build().map_err(|e| CliError::Usage(e.to_string()))?;
    let listener = bind(addr).await?;
    let bound = listener.local_addr()?;
    print(&format!("approval page: http://{bound}/\n"))?;
    if let Some(c) = &config {
        print(&format!("{}\n", c.summary()))?;
    }
    if !authenticated {
        print("no --api-key: anonymous access is allowed because the server listens on loopback only\n")?;
    }
    // Under `genkit start` (GENKIT_ENV=dev) the Genkit CLI finds the agents too.
    #[cfg(feature = "reflection")]
    let _reflection = holdpoint_reflection::start_if_dev(&server).await;
    holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal()).await?;
    if let Some(worker) = notifications {
        worker.shutdown().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use holdpoint::ScriptedModel;

    use super::*;

    fn agent(policy: bool) -> Agent {
        let mut b = Agent::builder("bankingAgent").model(Arc::new(ScriptedModel::new("scripted")));
        if policy {
            let config = rules();
            b = b.approval_policy(config.approval_policy());
        }
        b.build().unwrap()
    }

    fn rules() -> Config {
        let text = "[[auth.api_keys]]\nprincipal = \"olga\"\nkey = \"k-olga-0123456789\"\nroles = [\"finance\"]\n\n[[approval.rules]]\ntool = \"transferMoney\"\napprovers = [\"finance\"]\n";
        Config::parse(text, "rules.toml").unwrap()
    }

    #[test]
    fn configured_rules_and_mcp_servers_are_never_silently_dropped() {
        // Rules for agents built without the policy: refused, naming the file.
        let err = check_prebuilt(&[agent(false)], &rules()).unwrap_err().to_string();
        assert!(err.contains("rules.toml") && err.contains("approval.rules"), "{err}");
        // Built with the policy: served.
        assert!(check_prebuilt(&[agent(true)], &rules()).is_ok());
        // An MCP server none of whose tools any agent has: refused.
        let mcp = Config::parse(
            "[[mcp.servers]]\nname = \"everything\"\ncommand = \"node\"\n",
            "mcp.toml",
        )
        .unwrap();
        let err = check_prebuilt(&[agent(false)], &mcp).unwrap_err().to_string();
        assert!(err.contains("\"everything\""), "{err}");
    }
}
