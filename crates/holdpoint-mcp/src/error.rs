//! The errors of this crate.

use std::time::Duration;

/// What went wrong talking to an MCP server, or in its configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A `[[mcp.servers]]` entry is not usable.
    #[error("MCP server \"{server}\": {message}")]
    Config {
        /// The server's configured name.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// The server process could not be started.
    #[error("MCP server \"{server}\": could not start `{command}`: {source}")]
    Spawn {
        /// The server's configured name.
        server: String,
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection or the protocol handshake failed.
    #[error("MCP server \"{server}\": could not connect: {message}")]
    Connect {
        /// The server's configured name.
        server: String,
        /// Why.
        message: String,
    },
    /// The handshake did not finish in time.
    #[error("MCP server \"{server}\": no answer to the handshake within {0:?}", .timeout)]
    ConnectTimeout {
        /// The server's configured name.
        server: String,
        /// How long it waited.
        timeout: Duration,
    },
    /// A request failed (the server went away, answered with an error or
    /// with something that is not an MCP answer).
    #[error("MCP server \"{server}\": {message}")]
    Request {
        /// The server's configured name.
        server: String,
        /// Why.
        message: String,
    },
    /// The stdio server died more often than its restart policy allows.
    #[error("MCP server \"{server}\": gave up after {restarts} restarts; last error: {last}")]
    GaveUp {
        /// The server's configured name.
        server: String,
        /// Restarts made.
        restarts: u32,
        /// The last connection error.
        last: String,
    },
}
