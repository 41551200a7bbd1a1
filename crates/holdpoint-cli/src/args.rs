//! The command line, as clap parses it (validated in [`crate::backend`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Operate Holdpoint agents: paused calls, sessions, the audit trail.
#[derive(Parser, Debug)]
#[command(name = "holdpoint", version, about)]
pub struct Cli {
    /// Session store to read and write directly: memory:, sqlite:PATH or
    /// postgres://… (default: the --config file's `[server] store`, else,
    /// with registered agents, their own store).
    #[arg(long, global = true, env = "HOLDPOINT_STORE", conflicts_with = "server")]
    pub store: Option<String>,
    /// The deployment's TOML configuration file (docs/reference.md,
    /// "Configuration"): what `serve` serves with and `mcp list` lists, and
    /// the store other commands use when --store is not given (its
    /// `[server] store`). A flag given as well wins over the file.
    #[arg(long, global = true, env = "HOLDPOINT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A running holdpoint server, e.g. http://127.0.0.1:8080.
    #[arg(long, global = true, env = "HOLDPOINT_SERVER")]
    pub server: Option<String>,
    /// The server's API key (sent as X-API-Key).
    #[arg(long, global = true, env = "HOLDPOINT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Only this agent's sessions, calls and decisions.
    #[arg(long, global = true)]
    pub agent: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List, show or abort sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Paused calls waiting for an answer, newest first.
    Pending(ListArgs),
    /// Approve a paused call: it runs and the turn goes on.
    Approve(DecideArgs),
    /// Deny a paused call: the model is told, with the reason.
    Deny(DecideArgs),
    /// Answer a paused call with an output, without running the tool (a call
    /// in doubt is settled with `settle`).
    Respond(RespondArgs),
    /// Answer a tool's own question (an MCP server's elicitation): the call
    /// restarts with the answer and the turn goes on.
    Answer(AnswerArgs),
    /// MCP servers of a configuration file: status and tools.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Calls left in doubt: a resume claimed them and its process died,
    /// so they may or may not have run (never re-run on their own).
    InDoubt(ListArgs),
    /// Settle a call left in doubt: answer it with what it did (--output),
    /// or deliberately run it again (--rerun).
    Settle(SettleArgs),
    /// Decisions about paused calls, newest first.
    Audit(AuditArgs),
    /// Standing grants: list, revoke.
    #[command(subcommand)]
    Grants(crate::grants::GrantsCommand),
    /// The notifications outbox: events and timers, delivered / retrying /
    /// dead, with attempts and the last error, and stopped endpoints
    /// (--store, or --server with an operator's --api-key).
    #[command(subcommand)]
    Notifications(NotificationsCommand),
    /// Serve the registered agents over HTTP with the approval page.
    Serve(ServeArgs),
    /// Delete sessions that are over (completed, failed, aborted; never
    /// one waiting at a hold or in doubt) and older than --older-than
    /// (needs --store).
    Prune(crate::prune::PruneArgs),
    /// Approval receipts: verify one offline against a JWKS.
    #[command(subcommand)]
    Receipt(crate::receipt::ReceiptCommand),
}

/// `notifications …`.
#[derive(Subcommand, Debug)]
pub enum NotificationsCommand {
    /// Outbox rows, oldest due first, and the endpoints stopped by a 410.
    List {
        /// Only rows in this state: pending, retrying, delivered, dead or
        /// cancelled.
        #[arg(long)]
        state: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Skip this many rows (the next page).
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Makes a row pending again, due now, its attempts reset (a dead
    /// event's second chance); re-enables the stopped endpoints it skipped.
    Retry {
        /// The event id (see `notifications list`).
        id: String,
    },
    /// Re-enables an endpoint stopped after answering 410.
    Enable {
        /// The channel id (`webhook:0`, `slack:1`; see `notifications list`).
        channel: String,
    },
}

/// `sessions …`.
#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// Sessions, most recently updated first (needs --store).
    List(ListArgs),
    /// One session: its latest snapshot, messages and paused calls.
    Show {
        /// The session id.
        session: String,
    },
    /// Abort a snapshot's run (a detached run stops; a paused one can no
    /// longer be resumed).
    Abort {
        /// The snapshot id.
        snapshot: String,
    },
}

/// Options of listings.
#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    /// At most this many rows.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
}

/// `audit` options.
#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// Only this session's decisions.
    #[arg(long)]
    pub session: Option<String>,
    /// At most this many rows.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
}

/// `approve` / `deny` arguments.
#[derive(Args, Debug, Clone)]
pub struct DecideArgs {
    /// The snapshot holding the paused call (see `holdpoint pending`).
    pub snapshot: String,
    /// The call's ref (see `holdpoint pending`); may be left out when the
    /// snapshot holds one paused call.
    #[arg(name = "REF")]
    pub reference: Option<String>,
    /// Why; recorded in the audit trail and, on a denial, told to the model.
    #[arg(long)]
    pub reason: Option<String>,
    /// With `approve`: a standing grant.
    #[command(flatten)]
    pub grant: crate::grants::GrantArgs,
    /// With `approve`: the call's input as edited, as JSON, e.g.
    /// '{"amount": 400, "toAccount": "savings"}'. The call restarts with
    /// it and the approval; the tool's input schema must accept it. Under
    /// an approval rule the edited call is held again for the rule's
    /// approvers.
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
}

/// `respond` arguments.
#[derive(Args, Debug, Clone)]
pub struct RespondArgs {
    /// The snapshot holding the paused call.
    pub snapshot: String,
    /// The call's ref; may be left out when the snapshot holds one paused
    /// call.
    #[arg(name = "REF")]
    pub reference: Option<String>,
    /// The tool's output as JSON, e.g. '{"success": true}'.
    #[arg(long)]
    pub output: String,
}

/// `answer` arguments.
#[derive(Args, Debug, Clone)]
pub struct AnswerArgs {
    /// The snapshot holding the paused call.
    pub snapshot: String,
    /// The call's ref; may be left out when the snapshot holds one paused
    /// call.
    #[arg(name = "REF")]
    pub reference: Option<String>,
    /// accept, decline or cancel.
    #[arg(long, value_parser = ["accept", "decline", "cancel"])]
    pub action: String,
    /// With accept: the answer as a JSON object, checked against the
    /// question's schema, e.g. '{"name": "Ada"}'.
    #[arg(long)]
    pub content: Option<String>,
}

/// `mcp …`.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Connect to each `[[mcp.servers]]` entry of the --config file and
    /// list its status and tools.
    List,
}

/// `settle` arguments.
#[derive(Args, Debug, Clone)]
#[command(group = clap::ArgGroup::new("answer").required(true).args(["output", "rerun"]))]
pub struct SettleArgs {
    /// The snapshot whose resume was left in doubt (see `holdpoint in-doubt`).
    pub snapshot: String,
    /// The call's ref; may be left out when the snapshot holds one paused
    /// call.
    #[arg(name = "REF")]
    pub reference: Option<String>,
    /// What the call did, as JSON (check the real system first), e.g.
    /// '{"success": true}'; the tool does not run.
    #[arg(long)]
    pub output: Option<String>,
    /// Run the call again: only when you know it did not take effect.
    #[arg(long)]
    pub rerun: bool,
}

/// `serve` options. The global --config file gives API keys with roles,
/// JWT/OIDC, approval rules, notification channels, MCP servers and
/// `[server]` settings; a flag given as well wins over the file's setting,
/// and --api-key adds an `operator` key beside the file's keys.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Where to listen (default: the file's `[server] listen`, else
    /// 127.0.0.1:8080; a non-loopback address needs --api-key or
    /// credentials in --config).
    #[arg(long)]
    pub addr: Option<String>,
    /// Where the state-signing keys are kept.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Serve `GET /metrics` without credentials (by default it needs the API
    /// key; an anonymous loopback server serves it to its callers).
    #[arg(long)]
    pub metrics_open: bool,
    /// A host name, besides the loopback ones, that an anonymous server
    /// answers (for a proxy in front of it); repeatable.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
}
