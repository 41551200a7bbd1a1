//! The file as written: serde structs that refuse unknown keys and keep the
//! spans of the values later checks may refuse.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

pub(super) type S<T> = Spanned<T>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub public_url: Option<S<String>>,
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub approval: RawApproval,
    #[serde(default)]
    pub notify: RawNotify,
    #[serde(default)]
    pub mcp: RawMcp,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub listen: Option<S<String>>,
    pub store: Option<S<String>>,
    pub data_dir: Option<String>,
    pub metrics_open: Option<bool>,
    pub allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    pub roles: Vec<S<String>>,
    #[serde(default)]
    pub api_keys: Vec<S<RawApiKey>>,
    pub jwt: Option<S<RawJwt>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApiKey {
    pub principal: S<String>,
    pub key: S<String>,
    #[serde(default)]
    pub roles: Vec<S<String>>,
    pub agents: Option<Vec<S<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    pub jwks_url: Option<S<String>>,
    pub issuer: Option<S<String>>,
    pub audience: Option<S<String>>,
    pub roles_claim: Option<S<String>>,
    pub principal: Option<S<String>>,
    pub refresh_interval: Option<S<String>>,
    pub min_refetch_interval: Option<S<String>>,
    pub timeout: Option<S<String>>,
    pub page_client_id: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApproval {
    #[serde(default)]
    pub rules: Vec<S<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub name: Option<S<String>>,
    pub agent: Option<S<String>>,
    pub tool: Option<S<String>>,
    pub when: Option<S<String>>,
    pub approvers: S<Vec<S<String>>>,
    pub quorum: Option<S<i64>>,
    pub self_approval: Option<bool>,
    pub remind_after: Option<S<String>>,
    pub escalate_after: Option<S<String>>,
    pub escalate_to: Option<S<Vec<S<String>>>>,
    pub expire_after: Option<S<String>>,
    pub on_expire: Option<S<String>>,
    pub confirm: Option<bool>,
    pub deny_reasons: Option<S<Vec<S<String>>>>,
    pub reason_required: Option<bool>,
    pub redact: Option<S<Vec<S<String>>>>,
    pub max_review_bytes: Option<S<i64>>,
    pub require_preview: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    #[serde(default)]
    pub webhooks: Vec<S<RawWebhook>>,
    pub smtp: Option<S<RawSmtp>>,
    #[serde(default)]
    pub email: Vec<S<RawEmail>>,
    #[serde(default)]
    pub slack: Vec<S<RawSlack>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    pub url: S<String>,
    pub secret: S<String>,
    pub events: Option<Vec<S<String>>>,
    pub roles: Option<Vec<S<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSmtp {
    pub host: S<String>,
    pub port: Option<S<i64>>,
    pub from: S<String>,
    pub tls: Option<S<String>>,
    pub username: Option<S<String>>,
    pub password: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEmail {
    pub to: S<Vec<S<String>>>,
    pub events: Option<Vec<S<String>>>,
    pub roles: Option<Vec<S<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlack {
    pub webhook_url: S<String>,
    pub events: Option<Vec<S<String>>>,
    pub roles: Option<Vec<S<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub servers: Vec<S<RawMcpServer>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    pub name: S<String>,
    pub command: Option<S<String>>,
    pub args: Option<S<Vec<String>>>,
    pub env: Option<S<BTreeMap<String, String>>>,
    pub url: Option<S<String>>,
    pub headers: Option<S<BTreeMap<String, String>>>,
    pub agents: Option<Vec<S<String>>>,
    // The rest of `holdpoint_mcp::ServerConfig`'s keys, handed on as they
    // are (that crate checks them when it connects).
    pub cwd: Option<String>,
    pub bearer_token: Option<String>,
    pub bearer_token_env: Option<String>,
    pub tool_names: Option<String>,
    pub timeout_secs: Option<f64>,
    pub connect_timeout_secs: Option<f64>,
    pub elicitation_timeout_secs: Option<f64>,
    pub max_restarts: Option<u32>,
}
