//! `banking serve`: the agent over HTTP as `bankingAgent`, with the
//! approval page at `/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdpoint::Model;
use holdpoint::agent::AgentBuilder;
use holdpoint::approval::Policy;
use holdpoint::session::SessionStore;
use holdpoint_deploy::{Config, Serving};
use holdpoint_receipt::ReceiptSigner;
use holdpoint_server::{Metrics, Server};

/// What `serve` needs, validated.
pub struct ServeConfig {
    /// Where to listen (bound by [`bind`]).
    pub listener: tokio::net::TcpListener,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The store.
    pub store: Arc<dyn SessionStore>,
    /// The API key of `--api-key`, if any (principal `operator`, no roles).
    pub api_key: Option<String>,
    /// The `--config` file, if any.
    pub config: Option<Config>,
    /// Where the state-signing keys and the receipt keys live.
    pub data_dir: PathBuf,
    /// `[server]` with the flags over it (`data_dir` set to [`Self::data_dir`]):
    /// `/metrics` access, allowed hosts.
    pub serving: Serving,
}

/// Binds `addr` (checked against the key policy already:
/// [`Serving::check_exposure`]), before anything else is set up (so a busy
/// port is the only line printed).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            format!("{addr} is already in use: stop the other server or pick another port with --addr 127.0.0.1:PORT")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("not allowed to listen on {addr}: pick a port above 1023 with --addr 127.0.0.1:PORT")
        }
        _ => format!("cannot listen on {addr}: {e}"),
    })
}

/// Hands the configuration file's approval policy to the agent being built
/// (docs/reference.md §10.5): `bankingAgent` then holds the calls its
/// `[[approval.rules]]` cover for their approvers.
pub fn apply_policy(builder: AgentBuilder, policy: Option<Policy>) -> AgentBuilder {
    banking::with_policy(builder, policy)
}

/// The approval receipt signer of `data_dir` (its keys created on first
/// use), made the transfer service's requirement, and its public keys as
/// published.
fn receipts(data_dir: &Path) -> Result<(Arc<ReceiptSigner>, serde_json::Value), String> {
    let receipts = Arc::new(
        ReceiptSigner::load_or_create(data_dir)
            .map_err(|e| format!("approval receipt keys in {}: {e}", data_dir.display()))?,
    );
    banking::service::require_receipts(receipts.jwks());
    let receipt_keys = serde_json::to_value(receipts.jwks()).map_err(|e| e.to_string())?;
    Ok((receipts, receipt_keys))
}

/// Prints where the agents and the approval page are, the configuration
/// file's summary, and what requests need.
fn announce(bound: SocketAddr, file: Option<&Config>, authenticated: bool) {
    println!(
        "serving {} at http://{bound}/agents/{}",
        banking::AGENT_NAME,
        banking::AGENT_NAME
    );
    println!(
        "serving {} at http://{bound}/agents/{} (it hands account operations to {})",
        banking::SUPPORT_AGENT_NAME,
        banking::SUPPORT_AGENT_NAME,
        banking::AGENT_NAME
    );
    println!("approval page: http://{bound}/");
    if let Some(c) = file {
        println!("{}", c.summary());
    }
    if authenticated {
        println!("requests need an API key (X-API-Key header, or enter it on the page) or a bearer token");
    } else {
        println!("no --api-key: anonymous access is allowed because the server listens on loopback only");
    }
}

/// Says where to go, and serves until Ctrl-C.
pub async fn run(config: ServeConfig) -> Result<(), String> {
    let file = config.config.as_ref();
    let support_model = banking::support_model_for(&config.model);
    // The file's MCP servers stay connected while the server runs; their
    // tools join bankingAgent's (`agents = [...]` chooses).
    let mcp = match file {
        Some(c) => holdpoint_deploy::mcp_servers(c).await.map_err(|e| e.to_string())?,
        None => None,
    };
    // `/metrics`: both agents' store operations, and bankingAgent's tool
    // calls (MCP tools by their `{server}_{tool}` names) as they run.
    let metrics = Metrics::new();
    let store = metrics.store(Arc::clone(&config.store));
    // Approval receipts: signed with keys kept in the data directory,
    // published at /.well-known/holdpoint-receipts.json, and required by
    // the transfer service before money moves (docs/reference.md §20).
    let (receipts, receipt_keys) = receipts(&config.data_dir)?;
    let builder = banking::builder(config.model, Some(Arc::clone(&store)))
        .map_err(|e| e.to_string())?
        .receipts(receipts)
        .middleware(metrics.middleware())
        .tools(holdpoint_deploy::mcp_tools(mcp.as_ref(), banking::AGENT_NAME));
    let agent = apply_policy(builder, file.map(Config::approval_policy))
        .build()
        .map_err(|e| e.to_string())?;
    // The front desk hands account operations to bankingAgent (a sub-agent).
    let support = banking::support_agent(support_model, agent.clone(), store).map_err(|e| e.to_string())?;
    // The file's notifications: the outbox of the store, delivered until
    // the server stops; expiry timers are answered by the agent holding the call.
    let notifications = match file {
        Some(c) => holdpoint_deploy::start_notifications(
            c,
            Arc::clone(&config.store),
            vec![agent.clone(), support.clone()],
            &metrics,
        )
        .map_err(|e| e.to_string())?,
        None => None,
    };
    let builder = Server::builder()
        .metrics(metrics)
        .agent(agent)
        .agent(support)
        .receipt_keys(receipt_keys);
    let mut builder = config.serving.apply(builder);
    // Operators (the `operator` role) see the outbox at /notifications.
    if notifications.is_some() {
        builder = builder.notifications(Arc::clone(&config.store));
    }
    // The file's API keys, JWT and page sign-in, and `--api-key` as the
    // operator's key (it may also see and steer the notification pipe).
    let (builder, authenticated) = holdpoint_deploy::authenticate(builder, file, config.api_key.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let server = builder.build().map_err(|e| e.to_string())?;
    let listener = config.listener;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    announce(bound, file, authenticated);
    // Under `genkit start` (GENKIT_ENV=dev) the Genkit CLI finds the agent too.
    #[cfg(feature = "reflection")]
    let _reflection = holdpoint_reflection::start_if_dev(&server).await;
    let served = holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal())
        .await
        .map_err(|e| format!("server stopped: {e}"));
    if let Some(worker) = notifications {
        worker.shutdown().await;
    }
    if let Some(servers) = mcp {
        servers.close().await;
    }
    served
}
