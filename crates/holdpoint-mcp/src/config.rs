//! The runtime configuration of one MCP server (a `[[mcp.servers]]` entry).

use std::collections::BTreeMap;
use std::time::Duration;

use holdpoint_secret::Secret;
use serde::Deserialize;

use crate::error::McpError;

/// The default name of a server's tools: `{server}_{tool}`.
pub const DEFAULT_TOOL_NAMES: &str = "{server}_{tool}";

/// One MCP server, as a `[[mcp.servers]]` table spells it: `name`, and
/// either `command` (+ `args`, `env`, `cwd`) for a stdio server or `url`
/// (+ `headers`, `bearer_token` / `bearer_token_env`) for a Streamable HTTP
/// server. Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The server's name: unique among the servers, part of its tools' names.
    pub name: String,
    /// The program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables of the process (the rest is inherited);
    /// the values are secrets (they often carry tokens).
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// The process's working directory (default: Holdpoint's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The endpoint of a Streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// Extra HTTP headers sent with every request (the values are secrets).
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// A bearer token sent as `Authorization: Bearer …`.
    #[serde(default)]
    pub bearer_token: Option<Secret>,
    /// The environment variable holding the bearer token (read when the
    /// server is connected), so the file need not carry the secret.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// How the server's tools are named; `{server}` and `{tool}` are
    /// replaced (default `{server}_{tool}`). Characters other than ASCII
    /// letters, digits, `_` and `-` become `_`.
    #[serde(default)]
    pub tool_names: Option<String>,
    /// The agents that get this server's tools (`None`: every agent).
    #[serde(default)]
    pub agents: Option<Vec<String>>,
    /// Seconds a call may run before it is cancelled (default 60). Time a
    /// call spends held on the server's question does not count.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Seconds the connection and handshake may take (default 30).
    #[serde(default)]
    pub connect_timeout_secs: Option<f64>,
    /// Seconds a server's question (elicitation) stays open while the call
    /// is held (default 600); after that the server is told `cancel`.
    #[serde(default)]
    pub elicitation_timeout_secs: Option<f64>,
    /// How many times in a row a dead connection is re-established (a stdio
    /// server restarted) before calls fail at once (default 3). A call
    /// that succeeds resets the count.
    #[serde(default)]
    pub max_restarts: Option<u32>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (values secret).
        env: BTreeMap<String, Secret>,
        /// Working directory.
        cwd: Option<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The URL.
        url: String,
        /// Extra headers (values secret).
        headers: BTreeMap<String, Secret>,
        /// The bearer token, if any.
        bearer_token: Option<Secret>,
    },
}

impl Transport {
    /// `"stdio"` or `"http"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

impl ServerConfig {
    /// A stdio server running `command` with `args`.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerConfig {
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            ..ServerConfig::named(name)
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        ServerConfig {
            url: Some(url.into()),
            ..ServerConfig::named(name)
        }
    }

    fn named(name: impl Into<String>) -> Self {
        ServerConfig {
            name: name.into(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            bearer_token: None,
            bearer_token_env: None,
            tool_names: None,
            agents: None,
            timeout_secs: None,
            connect_timeout_secs: None,
            elicitation_timeout_secs: None,
            max_restarts: None,
        }
    }

    fn bad(&self, message: impl Into<String>) -> McpError {
        McpError::Config {
            server: self.name.clone(),
            message: message.into(),
        }
    }

    /// Checks the entry and says how the server is reached: a name, and
    /// exactly one of `command` and `url`; stdio keys only with `command`,
    /// HTTP keys only with `url`; positive finite durations.
    pub fn transport(&self) -> Result<Transport, McpError> {
        if self.name.trim().is_empty() {
            return Err(self.bad("`name` must not be empty"));
        }
        for (key, v) in [
            ("timeout_secs", self.timeout_secs),
            ("connect_timeout_secs", self.connect_timeout_secs),
            ("elicitation_timeout_secs", self.elicitation_timeout_secs),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v > 0.0 && v < 1e9)
            {
                return Err(self.bad(format!("`{key}` must be a positive number of seconds, got {v}")));
            }
        }
        if let Some(t) = &self.tool_names
            && !t.contains("{tool}")
        {
            return Err(self.bad("`tool_names` must contain `{tool}`"));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err(self.bad("give either `command` (stdio) or `url` (Streamable HTTP), not both")),
            (None, None) => Err(self.bad("give `command` (stdio) or `url` (Streamable HTTP)")),
            (Some(command), None) => {
                if !self.headers.is_empty() || self.bearer_token.is_some() || self.bearer_token_env.is_some() {
                    return Err(self.bad("`headers` and bearer tokens apply only to `url` servers"));
                }
                if command.trim().is_empty() {
                    return Err(self.bad("`command` must not be empty"));
                }
                Ok(Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.clone(),
                })
            }
            (None, Some(url)) => {
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err(self.bad("`args`, `env` and `cwd` apply only to `command` servers"));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.bad(format!("`url` must be an http:// or https:// URL, got \"{url}\"")));
                }
                let bearer_token = match (&self.bearer_token, &self.bearer_token_env) {
                    (Some(_), Some(_)) => return Err(self.bad("give `bearer_token` or `bearer_token_env`, not both")),
                    (Some(t), None) => Some(t.clone()),
                    (None, Some(var)) => Some(Secret::new(std::env::var(var).map_err(|_| {
                        self.bad(format!("`bearer_token_env`: environment variable {var} is not set"))
                    })?)),
                    (None, None) => None,
                };
                for (k, v) in &self.headers {
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || http::HeaderValue::from_str(v.expose()).is_err()
                    {
                        return Err(self.bad(format!("header \"{k}\" is not a valid HTTP header")));
                    }
                    if k.eq_ignore_ascii_case("authorization") {
                        return Err(self.bad("set the Authorization header with `bearer_token`, not `headers`"));
                    }
                }
                Ok(Transport::Http {
                    url: url.clone(),
                    headers: self.headers.clone(),
                    bearer_token,
                })
            }
        }
    }

    /// The Holdpoint name of this server's MCP tool `tool`.
    pub fn tool_name(&self, tool: &str) -> String {
        let template = self.tool_names.as_deref().unwrap_or(DEFAULT_TOOL_NAMES);
        let raw = template.replace("{server}", &self.name).replace("{tool}", tool);
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Whether `agent` gets this server's tools.
    pub fn serves(&self, agent: &str) -> bool {
        self.agents.as_ref().is_none_or(|a| a.iter().any(|n| n == agent))
    }

    pub(crate) fn call_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_secs.unwrap_or(60.0))
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.connect_timeout_secs.unwrap_or(30.0))
    }

    pub(crate) fn elicitation_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.elicitation_timeout_secs.unwrap_or(600.0))
    }

    pub(crate) fn restarts_allowed(&self) -> u32 {
        self.max_restarts.unwrap_or(3)
    }
}
