//! The `[[mcp.servers]]` section: one transport per server, unique names,
//! checked into `holdpoint-mcp`'s own settings ([`ServerConfig`]).

use std::collections::{BTreeMap, HashMap};

use holdpoint_mcp::ServerConfig;
use holdpoint_secret::Secret;
use toml::Spanned;

use super::{Checker, at};
use crate::config::error::{ConfigError, ConfigErrorKind as K};
use crate::config::raw::*;

fn secrets(m: &BTreeMap<String, String>) -> BTreeMap<String, Secret> {
    m.iter().map(|(k, v)| (k.clone(), Secret::new(v.clone()))).collect()
}

impl Checker<'_, '_> {
    pub(super) fn mcp(&self, raw: RawMcp) -> Result<Vec<ServerConfig>, ConfigError> {
        let mut out = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, server) in raw.servers.iter().enumerate() {
            let s = server.get_ref();
            let p = format!("mcp.servers[{i}]");
            let name = s.name.get_ref();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(self.err(
                    &s.name,
                    format!("{p}.name"),
                    K::Invalid,
                    "must be letters, digits, `_` or `-` (it prefixes the server's tool names)",
                ));
            }
            if let Some(first) = names.insert(name.clone(), i) {
                return Err(self.err(
                    &s.name,
                    format!("{p}.name"),
                    K::DuplicateKey,
                    format!("server \"{name}\" is already configured by mcp.servers[{first}]"),
                ));
            }
            let config = match (&s.command, &s.url) {
                (Some(command), None) => self.mcp_stdio(s, command, &p)?,
                (None, Some(url)) => self.mcp_http(s, url, &p)?,
                (Some(command), Some(_)) => {
                    return Err(self.err(
                        command,
                        format!("{p}.command"),
                        K::Invalid,
                        "give either `command` (stdio) or `url` (Streamable HTTP), not both",
                    ));
                }
                (None, None) => {
                    return Err(self.err(
                        server,
                        p,
                        K::Invalid,
                        "give `command` (+ `args`, `env`) for stdio or `url` (+ `headers`) for Streamable HTTP",
                    ));
                }
            };
            out.push(ServerConfig {
                agents: s
                    .agents
                    .as_ref()
                    .map(|a| a.iter().map(|s| s.get_ref().clone()).collect()),
                tool_names: s.tool_names.clone(),
                timeout_secs: s.timeout_secs,
                connect_timeout_secs: s.connect_timeout_secs,
                elicitation_timeout_secs: s.elicitation_timeout_secs,
                max_restarts: s.max_restarts,
                ..config
            });
        }
        Ok(out)
    }

    /// A `command` server: no `headers`, a command that is not blank.
    fn mcp_stdio(&self, s: &RawMcpServer, command: &Spanned<String>, p: &str) -> Result<ServerConfig, ConfigError> {
        if let Some(h) = &s.headers {
            return Err(self.err(h, format!("{p}.headers"), K::Invalid, "goes with `url`, not `command`"));
        }
        if command.get_ref().trim().is_empty() {
            return Err(self.err(command, format!("{p}.command"), K::Invalid, "must not be empty"));
        }
        let args = s.args.as_ref().map(|a| a.get_ref().clone()).unwrap_or_default();
        Ok(ServerConfig {
            env: s.env.as_ref().map(|e| secrets(e.get_ref())).unwrap_or_default(),
            cwd: s.cwd.clone(),
            ..ServerConfig::stdio(s.name.get_ref().clone(), command.get_ref().clone(), args)
        })
    }

    /// A `url` server: no `args` or `env`, an http(s) URL; an
    /// `Authorization = "Bearer …"` header becomes MCP's bearer token (the
    /// one way `holdpoint-mcp` sends it).
    fn mcp_http(&self, s: &RawMcpServer, url: &Spanned<String>, p: &str) -> Result<ServerConfig, ConfigError> {
        for (field, value) in [("args", s.args.as_ref().map(at)), ("env", s.env.as_ref().map(at))] {
            if let Some(offset) = value {
                return Err(self.src.error(
                    offset,
                    format!("{p}.{field}"),
                    K::Invalid,
                    "goes with `command`, not `url`",
                ));
            }
        }
        let mut config = ServerConfig {
            bearer_token: s.bearer_token.clone().map(Secret::new),
            bearer_token_env: s.bearer_token_env.clone(),
            ..ServerConfig::http(s.name.get_ref().clone(), self.url(url, &format!("{p}.url"))?)
        };
        let Some(headers) = &s.headers else {
            return Ok(config);
        };
        config.headers = secrets(headers.get_ref());
        if let Some(key) = config
            .headers
            .keys()
            .find(|k| k.eq_ignore_ascii_case("authorization"))
            .cloned()
        {
            let value = config.headers.remove(&key).unwrap_or_default();
            let token = value.expose().strip_prefix("Bearer ").ok_or_else(|| {
                self.err(
                    headers,
                    format!("{p}.headers.{key}"),
                    K::Invalid,
                    "an MCP server's Authorization header must be \"Bearer <token>\"",
                )
            })?;
            if config.bearer_token.is_some() || config.bearer_token_env.is_some() {
                return Err(self.err(
                    headers,
                    format!("{p}.headers.{key}"),
                    K::Invalid,
                    "give the bearer token once: `bearer_token` or an Authorization header",
                ));
            }
            config.bearer_token = Some(Secret::new(token));
        }
        Ok(config)
    }
}
