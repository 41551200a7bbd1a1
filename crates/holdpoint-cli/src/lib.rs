//! `holdpoint`: the operator's command line for Holdpoint agents.
//!
//! Point it at a session store (`--store sqlite:PATH`, `postgres://…`, or
//! `--config FILE` whose `[server] store` names one; `--store` wins) or at
//! a running server (`--server http://HOST:PORT`, with `--api-key`), then:
//!
//! | command | what |
//! |---|---|
//! | `sessions list` | sessions, newest first (store only: a server has no session listing) |
//! | `sessions show SESSION` | the latest snapshot: status, messages, paused calls |
//! | `sessions abort SNAPSHOT` | stops a detached run; a paused snapshot can no longer be resumed |
//! | `pending` | paused calls waiting for an answer |
//! | `approve SNAPSHOT [REF] [--reason R]` | run the call; the turn goes on |
//! | `deny SNAPSHOT [REF] [--reason R]` | do not run it; the model is told why |
//! | `respond SNAPSHOT [REF] --output JSON` | settle the call with an output, without running the tool — how an in-doubt call (one whose effect you checked by hand) is closed |
//! | `audit [--session S]` | every decision, with principal and reason |
//! | `grants list [--active]` / `grants revoke ID` | standing grants (`approve … --grant session\|principal\|tool [--grant-ttl 1h] [--grant-uses N] [--grant-when CEL]` makes one) |
//! | `serve [--addr A]` | serve the registered agents with the approval page |
//! | `prune --older-than 30d [--audit] [--dry-run]` | delete sessions that are over and older than the age, in steps (store only) |
//!
//! Every listing takes `--json` (otherwise an aligned table) and `--agent
//! NAME` to filter. While a slow listing runs, a spinner and a count are
//! shown on standard error when it is a terminal.
//!
//! # Who runs the resumed turn
//!
//! Approving a call resumes the turn, and the turn runs the tool. Over
//! `--server` the server runs it. Against a `--store`, the tool must run
//! in this process, so the stock `holdpoint` binary — which has no agents —
//! answers `approve`, `deny` and `respond` with a line asking for
//! `--server`. Register your agents in a binary of your own and those
//! commands work against the store directly, as does `serve`:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     let store = match holdpoint_stores::open_store("sqlite:ops.db").await {
//!         Ok(store) => store,
//!         Err(e) => {
//!             eprintln!("error: {e}");
//!             return std::process::ExitCode::FAILURE;
//!         }
//!     };
//!     let model = Arc::new(banking::demo_model());
//!     let agents = match banking::banking_agent(model, Some(store)) {
//!         Ok(agent) => vec![agent],
//!         Err(e) => {
//!             eprintln!("error: {e}");
//!             return std::process::ExitCode::FAILURE;
//!         }
//!     };
//!     // `my-ops pending`, `my-ops approve SNAPSHOT REF`, `my-ops serve` …
//!     holdpoint_cli::run(agents).await
//! }
//! ```
//!
//! With agents registered and no `--store`, commands use the first agent's
//! store. With `--store`, resumed turns still write through each agent's own
//! store, so point `--store` at the same database.
//!
//! # Approve and deny, by kind of pause
//!
//! A hold raised by [`ToolApproval`](holdpoint::middleware::ToolApproval)
//! is approved or denied as such (`toolApproved`). A tool's own interrupt is
//! restarted with `{"approved": true}` or `{"approved": false, "reason": …}`
//! as its resume data, the shape the approval page and the banking example
//! use; a tool expecting something else is answered with `respond`.
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

pub mod args;
pub mod backend;
mod commands;
pub mod error;
pub mod grants;
pub mod http;
mod mcp;
mod notifications;
pub mod output;
pub mod prune;
mod receipt;
mod serve;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use holdpoint::agent::Agent;
use holdpoint::session::SessionStore;
use holdpoint_deploy::{Config, StoreOrigin, StoreSetting, choose_store};

pub use backend::{Backend, Decision, StoreBackend};
pub use commands::SessionRow;
pub use error::CliError;

/// Parses the process's arguments and runs the command with `agents`
/// registered; prints `error: …` (one line) on failure.
pub async fn run(agents: Vec<Agent>) -> ExitCode {
    let cli = args::Cli::parse();
    match run_cli(cli, agents).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs `args` (as on a command line, program name first) with `agents`.
pub async fn run_from<I, T>(args: I, agents: Vec<Agent>) -> Result<(), CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = args::Cli::try_parse_from(args).map_err(|e| CliError::Usage(e.to_string()))?;
    run_cli(cli, agents).await
}

async fn run_cli(cli: args::Cli, agents: Vec<Agent>) -> Result<(), CliError> {
    // `mcp list` reads a configuration file and needs no store or server.
    if let args::Command::Mcp(args::McpCommand::List) = &cli.command {
        return mcp::list(cli.config.as_deref(), cli.json).await;
    }
    // `receipt verify` checks a token offline: no store or server.
    if let args::Command::Receipt(command) = cli.command {
        return receipt::run(command, cli.json).await;
    }
    let serve = matches!(cli.command, args::Command::Serve(_));
    let backend = match (&cli.server, store(&cli, serve).await?) {
        (Some(url), _) => Backend::Server(http::HttpBackend::new(url, cli.api_key.clone())),
        (None, Some(store)) => Backend::Store(StoreBackend {
            store,
            agents: agents.clone(),
        }),
        (None, None) => match agents.iter().find_map(|a| a.store().cloned()) {
            Some(store) if !serve => Backend::Store(StoreBackend {
                store,
                agents: agents.clone(),
            }),
            _ if serve => Backend::Server(http::HttpBackend::new("", None)),
            _ => {
                return Err(CliError::Usage(
                    "say where to look: --store URL (sqlite:PATH, postgres://…), --config FILE with a `[server] store`, or --server http://HOST:PORT".into(),
                ));
            }
        },
    };
    commands::dispatch(cli, backend, agents).await
}

/// The store the command reads and writes directly, chosen as every
/// deployment chooses it ([`holdpoint_deploy::choose_store`]): `--store`,
/// else the `--config` file's `[server] store` (not for `serve`, whose
/// agents keep the stores they were built with); `None` without either, or
/// with `--server`.
async fn store(cli: &args::Cli, serve: bool) -> Result<Option<Arc<dyn SessionStore>>, CliError> {
    if cli.server.is_some() {
        return Ok(None);
    }
    let flag = match &cli.store {
        Some(url) => Some(
            StoreSetting::given(StoreOrigin::Flag("--store".into()), url)
                .map_err(|e| CliError::Usage(e.to_string()))?,
        ),
        None => None,
    };
    let config = match (&flag, &cli.config) {
        (None, Some(path)) if !serve => Some(Config::load(path)?),
        _ => None,
    };
    match choose_store(flag, config.as_ref()) {
        Some(chosen) => Ok(Some(chosen.open().await.map_err(|e| CliError::Usage(e.to_string()))?)),
        None => Ok(None),
    }
}
