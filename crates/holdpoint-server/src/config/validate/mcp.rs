//! The `[[mcp.servers]]` section: one transport per server, unique names.

use std::collections::{BTreeMap, HashMap};

use super::{Checker, at};
use crate::config::error::{ConfigError, ConfigErrorKind as K};
use crate::config::raw::*;
use crate::config::types::*;

impl Checker<'_, '_> {
    pub(super) fn mcp(&self, raw: RawMcp) -> Result<Vec<McpServerConfig>, ConfigError> {
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
            let secrets = |m: &BTreeMap<String, String>| -> BTreeMap<String, Secret> {
                m.iter().map(|(k, v)| (k.clone(), Secret::new(v.clone()))).collect()
            };
            let transport = match (&s.command, &s.url) {
                (Some(command), None) => {
                    if let Some(h) = &s.headers {
                        return Err(self.err(h, format!("{p}.headers"), K::Invalid, "goes with `url`, not `command`"));
                    }
                    if command.get_ref().trim().is_empty() {
                        return Err(self.err(command, format!("{p}.command"), K::Invalid, "must not be empty"));
                    }
                    McpTransport::Stdio {
                        command: command.get_ref().clone(),
                        args: s.args.as_ref().map(|a| a.get_ref().clone()).unwrap_or_default(),
                        env: s.env.as_ref().map(|e| secrets(e.get_ref())).unwrap_or_default(),
                    }
                }
                (None, Some(url)) => {
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
                    McpTransport::Http {
                        url: self.url(url, &format!("{p}.url"))?,
                        headers: s.headers.as_ref().map(|h| secrets(h.get_ref())).unwrap_or_default(),
                    }
                }
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
            out.push(McpServerConfig {
                name: name.clone(),
                transport,
                agents: s
                    .agents
                    .as_ref()
                    .map(|a| a.iter().map(|s| s.get_ref().clone()).collect()),
            });
        }
        Ok(out)
    }
}
