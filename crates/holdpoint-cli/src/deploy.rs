//! From a configuration file to the parts that run beside the server: the
//! MCP servers whose tools join the agents (`[[mcp.servers]]`), and the
//! notification worker that delivers the outbox (`[notify]`). `holdpoint
//! serve` and `banking serve` both start them from here.

use std::sync::Arc;

use async_trait::async_trait;
use holdpoint::Tool;
use holdpoint::agent::Agent;
use holdpoint::session::SessionStore;
use holdpoint_mcp::McpServers;
use holdpoint_notify::{
    DeliveryObserver, EmailSpec, ExpireOutcome, HoldActions, HoldRef, Notifier, NotifyConfig, Secret, SlackSpec,
    SmtpSpec, SmtpTls, WebhookSpec, WorkerHandle,
};
use holdpoint_server::config::{self, Config, McpTransport, Routing};
use serde_json::{Map, Value, json};

use crate::error::CliError;

/// Connects the file's MCP servers (`None` when it names none). A server
/// that cannot be reached stops the start.
pub async fn mcp_servers(config: &Config) -> Result<Option<McpServers>, CliError> {
    let entries = config.mcp_servers();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut specs = Vec::new();
    for entry in entries {
        let mut spec = Map::new();
        spec.insert("name".into(), json!(entry.name));
        match &entry.transport {
            McpTransport::Stdio { command, args, env } => {
                spec.insert("command".into(), json!(command));
                spec.insert("args".into(), json!(args));
                let env: Map<String, Value> = env.iter().map(|(k, v)| (k.clone(), json!(v.expose()))).collect();
                spec.insert("env".into(), Value::Object(env));
            }
            McpTransport::Http { url, headers } => {
                spec.insert("url".into(), json!(url));
                let headers: Map<String, Value> = headers.iter().map(|(k, v)| (k.clone(), json!(v.expose()))).collect();
                spec.insert("headers".into(), Value::Object(headers));
            }
            _ => {
                return Err(CliError::Usage(format!(
                    "mcp server {:?}: this transport is not supported",
                    entry.name
                )));
            }
        }
        if let Some(agents) = &entry.agents {
            spec.insert("agents".into(), json!(agents));
        }
        let spec: holdpoint_mcp::ServerConfig = serde_json::from_value(Value::Object(spec))
            .map_err(|e| CliError::Usage(format!("mcp server {:?}: {e}", entry.name)))?;
        specs.push(spec);
    }
    McpServers::connect(specs)
        .await
        .map(Some)
        .map_err(|e| CliError::Usage(format!("{}: [[mcp.servers]]: {e}", config.file().display())))
}

/// The tools `agent` gets from the connected MCP servers.
pub fn mcp_tools(servers: Option<&McpServers>, agent: &str) -> Vec<Arc<dyn Tool>> {
    servers.map(|s| s.tools_for(agent)).unwrap_or_default()
}

fn routing(r: &Routing) -> (Vec<String>, Vec<String>) {
    (
        r.events.iter().cloned().collect(),
        r.roles.iter().flatten().cloned().collect(),
    )
}

/// The delivery settings of the file's `[notify]` tables (`None` when it
/// has none).
pub fn notify_config(config: &Config) -> Option<NotifyConfig> {
    let n = config.notify();
    if n.webhooks.is_empty() && n.slack.is_empty() && n.email.is_empty() {
        return None;
    }
    let webhooks = n
        .webhooks
        .iter()
        .map(|w| {
            let (events, roles) = routing(&w.routing);
            WebhookSpec {
                url: Secret::new(w.url.clone()),
                secret: Secret::new(w.secret.expose()),
                events,
                roles,
            }
        })
        .collect();
    let slack = n
        .slack
        .iter()
        .map(|s| {
            let (events, roles) = routing(&s.routing);
            SlackSpec {
                webhook_url: Secret::new(s.webhook_url.expose()),
                events,
                roles,
            }
        })
        .collect();
    let email = n
        .email
        .iter()
        .map(|e| {
            let (events, roles) = routing(&e.routing);
            EmailSpec {
                to: e.to.clone(),
                events,
                roles,
            }
        })
        .collect();
    let smtp = n.smtp.as_ref().map(|s| SmtpSpec {
        host: s.host.clone(),
        port: Some(s.port),
        from: s.from.clone(),
        tls: match s.tls {
            config::SmtpTls::None => SmtpTls::None,
            config::SmtpTls::Tls => SmtpTls::Tls,
            _ => SmtpTls::Starttls,
        },
        username: s.credentials.as_ref().map(|(u, _)| u.clone()),
        password: s.credentials.as_ref().map(|(_, p)| Secret::new(p.expose())),
    });
    Some(NotifyConfig {
        public_url: config.public_url().map(str::to_owned),
        webhooks,
        slack,
        smtp,
        email,
        ..NotifyConfig::default()
    })
}

/// Answers expired holds with the agent that holds them.
struct ServedAgents(Vec<Agent>);

#[async_trait]
impl HoldActions for ServedAgents {
    async fn expire(&self, hold: &HoldRef) -> holdpoint::Result<ExpireOutcome> {
        let agent = self
            .0
            .iter()
            .find(|a| hold.agent.as_deref().is_none_or(|name| a.name() == name))
            .ok_or_else(|| {
                holdpoint::Error::FailedPrecondition(format!(
                    "no served agent holds {}",
                    hold.agent.as_deref().unwrap_or("this hold")
                ))
            })?;
        agent.expire(hold).await
    }

    async fn escalate(&self, hold: &HoldRef, roles: &[String]) -> holdpoint::Result<()> {
        let agent = self
            .0
            .iter()
            .find(|a| hold.agent.as_deref().is_none_or(|name| a.name() == name))
            .ok_or_else(|| {
                holdpoint::Error::FailedPrecondition(format!(
                    "no served agent holds {}",
                    hold.agent.as_deref().unwrap_or("this hold")
                ))
            })?;
        agent.escalate(hold, roles).await
    }
}

/// The worker's reports, recorded in the server's metrics (`/metrics`).
struct ServerMetrics(holdpoint_server::Metrics);

impl DeliveryObserver for ServerMetrics {
    fn delivered(&self, channel: &str, delay: std::time::Duration) {
        self.0.notification_delivered(channel, delay);
    }

    fn failed(&self, channel: &str) {
        self.0.notification_failed(channel);
    }

    fn dead(&self, kind: &str) {
        self.0.notification_dead(kind);
    }

    fn stopped(&self, channel: &str) {
        self.0.notification_endpoint_stopped(channel);
    }

    fn unrouted(&self, kind: &str) {
        self.0.notification_unrouted(kind);
    }
}

/// Starts the notification worker over `store` when the file configures
/// notifications; expiry and escalation timers are answered by the served
/// `agents`, and deliveries are counted in `metrics` (the server's
/// `/metrics`).
pub fn start_notifications(
    config: &Config,
    store: Arc<dyn SessionStore>,
    agents: Vec<Agent>,
    metrics: &holdpoint_server::Metrics,
) -> Result<Option<WorkerHandle>, CliError> {
    let Some(settings) = notify_config(config) else {
        return Ok(None);
    };
    let notifier =
        Notifier::new(settings).map_err(|e| CliError::Usage(format!("{}: [notify]: {e}", config.file().display())))?;
    let worker = holdpoint_notify::Worker::new(store, notifier)?
        .actions(Arc::new(ServedAgents(agents)))
        .observer(Arc::new(ServerMetrics(metrics.clone())));
    Ok(Some(worker.spawn()))
}
