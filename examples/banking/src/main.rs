//! `banking`: the seed's banking agent.
//!
//! - `banking chat [--message TEXT] [--model M] [--store URL] [--session ID]
//!   [--config FILE]`: a terminal chat; transfers and account closings pause
//!   for approval at the prompt (approve, deny, edit the amount then
//!   approve, or answer with JSON); `--session` continues a stored session,
//!   a call it left waiting first.
//! - `banking serve [--config FILE] [--addr 127.0.0.1:8080] [--api-key K]
//!   [--metrics-open] [--allowed-host HOST]…`: the agent over HTTP as
//!   `bankingAgent`, with the approval page at `/`; `--config` reads API
//!   keys with roles, JWT/OIDC and approval rules from a TOML file (a flag
//!   given as well wins over the file).
//! - `banking demo`: the three ways to resume, on the scripted model.

mod chat;
mod demo;
mod serve;
mod wiring;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The seed's banking agent: a transfer pauses for approval.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Chat in the terminal; approve paused calls at the prompt.
    Chat(ChatArgs),
    /// Serve the agent over HTTP as `bankingAgent`, with the approval page at `/`.
    Serve(ServeArgs),
    /// Run the three ways to resume on the scripted model.
    Demo,
}

const STORE_HELP: &str = "Session store URL: memory:, sqlite:PATH or postgres://… \
(default: the --config file's `[server] store`, else sqlite: $XDG_DATA_HOME/holdpoint/banking.db, \
created on first use)";

#[derive(clap::Args, Debug)]
struct ChatArgs {
    /// The first message (then the chat goes on reading standard input).
    #[arg(long)]
    message: Option<String>,
    /// `provider/model` (default: the first provider whose key is set, else
    /// the scripted demo model).
    #[arg(long, env = "HOLDPOINT_MODEL")]
    model: Option<String>,
    #[arg(long, env = "HOLDPOINT_STORE", help = STORE_HELP)]
    store: Option<String>,
    /// Continue this stored session (after a crash, or later): a call it
    /// left waiting is shown and answered first. Needs the store it ran on
    /// (a sqlite: file or postgres; memory: forgets sessions on exit).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// A TOML configuration file whose `[[approval.rules]]` govern the
    /// chat's calls (as `banking serve --config`): a call a rule holds is
    /// left to the rule's approvers (`holdpoint approve`). Its `[server]
    /// store` is the chat's store unless --store is given.
    #[arg(long, env = "HOLDPOINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl Default for ChatArgs {
    fn default() -> Self {
        ChatArgs {
            session: None,
            config: std::env::var_os("HOLDPOINT_CONFIG").map(PathBuf::from),
            message: None,
            model: std::env::var("HOLDPOINT_MODEL").ok(),
            store: std::env::var("HOLDPOINT_STORE").ok(),
        }
    }
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// A TOML configuration file: API keys with roles, JWT/OIDC, approval
    /// rules, `[server]` settings (docs/reference.md, "Configuration"). A
    /// flag given as well wins over the file; --api-key adds an `operator`
    /// key beside the file's keys.
    #[arg(long, env = "HOLDPOINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where to listen (default: the file's `[server] listen`, else
    /// 127.0.0.1:8080; a non-loopback address needs --api-key or API keys
    /// in --config).
    #[arg(long)]
    addr: Option<String>,
    /// `provider/model` (default: the first provider whose key is set, else
    /// the scripted demo model).
    #[arg(long, env = "HOLDPOINT_MODEL")]
    model: Option<String>,
    /// Session store URL: memory:, sqlite:PATH or postgres://… (default:
    /// the file's `[server] store`, else sqlite: $XDG_DATA_HOME/holdpoint/banking.db).
    #[arg(long, env = "HOLDPOINT_STORE")]
    store: Option<String>,
    /// The API key callers must send (without one, only loopback is served,
    /// anonymously).
    #[arg(long, env = "HOLDPOINT_API_KEY")]
    api_key: Option<String>,
    /// Where the server keeps its state-signing keys (default: the platform
    /// data directory's `holdpoint/`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Serve `GET /metrics` without credentials (by default it needs the API
    /// key; an anonymous loopback server serves it to its callers).
    #[arg(long)]
    metrics_open: bool,
    /// A host name, besides the loopback ones, that an anonymous server
    /// answers (for a proxy in front of it); repeatable.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
}

/// The `--config` file, checked whole (a mistake is one line naming the
/// file, the line and the key).
fn load(path: Option<&std::path::Path>) -> Result<Option<holdpoint_deploy::Config>, String> {
    path.map(holdpoint_deploy::Config::load)
        .transpose()
        .map_err(|e| e.to_string())
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command.unwrap_or(Command::Chat(ChatArgs::default())) {
        Command::Demo => demo::run().await.map_err(|e| format!("{e} ({})", e.status())),
        Command::Chat(args) => {
            let config = load(args.config.as_deref())?;
            let chosen = wiring::choose_store(args.store.as_deref(), config.as_ref())?;
            let store = wiring::open_store(&chosen).await?;
            let model = wiring::pick_model(args.model.as_deref())?;
            let durable = !chosen.is_memory();
            let policy = config.as_ref().map(holdpoint_deploy::Config::approval_policy);
            let start = match args.session {
                Some(id) => chat::Start::Continue(id, args.message),
                None => chat::Start::New(args.message),
            };
            chat::run(model, store, start, durable, policy)
                .await
                .map_err(|e| format!("{e} ({})", e.status()))
        }
        Command::Serve(args) => {
            let config = load(args.config.as_deref())?;
            let api_key = args.api_key.filter(|k| !k.is_empty());
            // A flag wins over the file; the file over the defaults.
            let flags = holdpoint_deploy::ServerFlags {
                addr: args.addr,
                data_dir: args.data_dir,
                metrics_open: args.metrics_open,
                allowed_hosts: args.allowed_hosts,
            };
            let mut serving = holdpoint_deploy::Serving::resolve(flags, config.as_ref()).map_err(|e| e.to_string())?;
            serving
                .check_exposure(api_key.as_deref(), config.as_ref())
                .map_err(|e| e.to_string())?;
            let listener = serve::bind(serving.listen).await?;
            let chosen = wiring::choose_store(args.store.as_deref(), config.as_ref())?;
            let store = wiring::open_served_store(&chosen, config.as_ref()).await?;
            let model = wiring::pick_model(args.model.as_deref())?;
            let data_dir = match serving.data_dir.take() {
                Some(d) => d,
                None => wiring::data_dir()?,
            };
            serving.data_dir = Some(data_dir.clone());
            serve::run(serve::ServeConfig {
                listener,
                model,
                store,
                api_key,
                config,
                data_dir,
                serving,
            })
            .await
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
