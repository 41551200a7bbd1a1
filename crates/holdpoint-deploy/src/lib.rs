//! One Holdpoint deployment from one file (docs/reference.md §15): the
//! configuration family and the wiring of what runs beside the server.
//!
//! `holdpoint.toml` is read once by [`Config::load`] and checked whole
//! before anything starts; each section lands in the settings type of the
//! crate that uses it, so nothing is spelled twice:
//!
//! | section | checked into | started by |
//! |---|---|---|
//! | `[server]` | [`ServerSettings`](config::ServerSettings) | [`Serving::resolve`] (flags win over the file), [`Serving::apply`] |
//! | `[server] store` | [`StoreSetting`] (a `holdpoint-stores` URL) | [`choose_store`], [`StoreSetting::open`] |
//! | `[auth]` | `holdpoint_server::auth` providers | [`authenticate`] |
//! | `[[approval.rules]]` | [`holdpoint::approval::Policy`] of [`RuleSpec`](holdpoint::approval::RuleSpec)s, timers and all | the agents' builders |
//! | `[notify]` | [`holdpoint_notify::NotifyConfig`] | [`start_notifications`] |
//! | `[[mcp.servers]]` | [`holdpoint_mcp::ServerConfig`] | [`mcp_servers`], [`mcp_tools`] |
//!
//! Every secret is a [`holdpoint_secret::Secret`] from the file to the code
//! that sends it. Data flows one way: this crate depends on the server,
//! notify and MCP crates; none of them depends on it.
//!
//! | module | job |
//! |---|---|
//! | [`config`] | the file: [`Config`], [`ConfigError`] with file, line and key |
//! | `auth` | the file's API keys, JWT and page sign-in onto a server builder |
//! | `mcp` | connecting the file's MCP servers, their tools per agent |
//! | `notify` | the notification worker over a store, timers answered by the served agents |
//! | `server` | `[server]` with the command line's flags over it: [`Serving`] |
//! | `store` | which store (flag, file, default) and opening it: [`StoreError`] |
//! | `error` | [`DeployError`] |
#![deny(missing_docs)]

mod auth;
pub mod config;
mod error;
mod mcp;
mod notify;
mod server;
mod store;

pub use auth::authenticate;
pub use config::{Config, ConfigError, StoreOrigin, StoreSetting};
pub use error::DeployError;
pub use mcp::{mcp_servers, mcp_tools};
pub use notify::start_notifications;
pub use server::{DEFAULT_LISTEN, ServerFlags, Serving};
pub use store::{StoreError, choose_store};
