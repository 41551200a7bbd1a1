//! `banking serve`: the agent over HTTP as `bankingAgent`, with the
//! approval page at `/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use holdpoint::Model;
use holdpoint::session::SessionStore;
use holdpoint_server::Server;
use holdpoint_server::auth::ApiKeys;

/// What `serve` needs, validated.
pub struct ServeConfig {
    /// Where to listen (bound by [`bind`]).
    pub listener: tokio::net::TcpListener,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The store.
    pub store: Arc<dyn SessionStore>,
    /// The API key, if any.
    pub api_key: Option<String>,
    /// Where the state-signing keys live.
    pub data_dir: PathBuf,
    /// Serve `GET /metrics` without credentials.
    pub metrics_open: bool,
    /// Host names an anonymous server answers besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

/// Checks `addr` against the key policy and binds it, before anything
/// else is set up (so a busy port is the only line printed).
pub async fn bind(addr: &str, api_key: Option<&str>) -> Result<tokio::net::TcpListener, String> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| format!("--addr {addr:?} is not IP:PORT, e.g. 127.0.0.1:8080"))?;
    if api_key.is_none() && !addr.ip().is_loopback() {
        return Err(format!(
            "listening on {addr} without --api-key would let anyone on the network approve transfers: pass --api-key KEY (or HOLDPOINT_API_KEY), or listen on 127.0.0.1"
        ));
    }
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

/// Says where to go, and serves until Ctrl-C.
pub async fn run(config: ServeConfig) -> Result<(), String> {
    let agent = banking::banking_agent(config.model, Some(config.store)).map_err(|e| e.to_string())?;
    let mut builder = Server::builder()
        .agent(agent)
        .data_dir(&config.data_dir)
        .metrics_open(config.metrics_open);
    if !config.allowed_hosts.is_empty() {
        builder = builder.allowed_hosts(config.allowed_hosts.iter().cloned());
    }
    builder = match &config.api_key {
        Some(key) => builder.api_keys(ApiKeys::new().key(key, "operator")),
        None => builder.allow_anonymous(true),
    };
    let server = builder.build().map_err(|e| e.to_string())?;
    let listener = config.listener;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    println!(
        "serving {} at http://{bound}/agents/{}",
        banking::AGENT_NAME,
        banking::AGENT_NAME
    );
    println!("approval page: http://{bound}/");
    match &config.api_key {
        Some(_) => println!("requests need the API key (X-API-Key header, or enter it on the page)"),
        None => println!("no --api-key: anonymous access is allowed because the server listens on loopback only"),
    }
    // Under `genkit start` (GENKIT_ENV=dev) the Genkit CLI finds the agent too.
    let _reflection = holdpoint_server::reflection::start_if_dev(&server).await;
    holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal())
        .await
        .map_err(|e| format!("server stopped: {e}"))
}
