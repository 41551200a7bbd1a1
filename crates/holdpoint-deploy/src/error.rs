//! [`DeployError`]: what reading the file or starting its parts fails with.

use std::path::PathBuf;

use crate::config::ConfigError;

/// Why a deployment cannot start. Every message names the file (and for
/// the file's own mistakes its line and key); none quotes a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// The file cannot be read or is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An MCP server of `[[mcp.servers]]` cannot be reached.
    #[error("{}: [[mcp.servers]]: {source}", file.display())]
    Mcp {
        /// The configuration file.
        file: PathBuf,
        /// Why.
        source: holdpoint_mcp::McpError,
    },
    /// `[notify]` cannot be started (a channel the worker refuses).
    #[error("{}: [notify]: {source}", file.display())]
    Notify {
        /// The configuration file.
        file: PathBuf,
        /// Why.
        source: holdpoint_notify::NotifyError,
    },
    /// `[notify]` needs what the store cannot do (its outbox).
    #[error("{}: [notify]: {source}", file.display())]
    NotifyStore {
        /// The configuration file.
        file: PathBuf,
        /// Why (the missing store capability).
        source: holdpoint::Error,
    },
    /// A command-line flag standing for a `[server]` key has a value that
    /// cannot be used (an `--addr` that is not `IP:PORT`).
    #[error("{0}")]
    Flag(String),
    /// No credentials (no operator key, no API keys or JWT in the file) and
    /// an address beyond loopback: anyone on the network could answer
    /// paused calls.
    #[error(
        "listening on {0} without --api-key would let anyone on the network answer paused calls: pass --api-key KEY (or HOLDPOINT_API_KEY, or API keys in --config), or listen on 127.0.0.1"
    )]
    Exposed(std::net::SocketAddr),
    /// `[auth.jwt]` cannot build its verifier.
    #[error("{}: [auth.jwt]: {source}", file.display())]
    Jwt {
        /// The configuration file.
        file: PathBuf,
        /// Why.
        source: holdpoint_server::auth::JwksError,
    },
}
