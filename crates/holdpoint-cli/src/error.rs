//! [`CliError`]: what an operator command can fail with.

/// Why a command failed. `Display` is the one line the CLI prints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The command line is incomplete or contradictory (e.g. neither
    /// `--store` nor `--server`, or `approve` against a store with no agents).
    #[error("{0}")]
    Usage(String),
    /// Nothing matches the id given.
    #[error("{0}")]
    NotFound(String),
    /// The store failed or refused.
    #[error("store: {0}")]
    Store(#[from] holdpoint::Error),
    /// The server could not be reached or answered with an error.
    #[error("server: {0}")]
    Server(String),
    /// The configuration file (`serve --config`) cannot be used; the
    /// message names the file, the line and the key.
    #[error("{0}")]
    Config(#[from] holdpoint_deploy::ConfigError),
    /// A part the configuration file describes cannot start (an MCP
    /// server, the notification worker, the JWT verifier); the message
    /// names the file.
    #[error("{0}")]
    Deploy(#[from] holdpoint_deploy::DeployError),
    /// Writing output failed.
    #[error("output: {0}")]
    Io(#[from] std::io::Error),
    /// The answer was taken but the turn it resumed failed (its output was
    /// printed): the command exits non-zero so scripts notice.
    #[error("the resumed turn failed: {0}")]
    TurnFailed(String),
}

impl CliError {
    /// The process exit code: 2 for usage, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Config(_) | CliError::Deploy(_) => 2,
            _ => 1,
        }
    }
}
