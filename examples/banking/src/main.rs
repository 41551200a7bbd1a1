//! `banking`: the seed's banking agent.
//!
//! - `banking chat [--message TEXT] [--model M] [--store URL]`: a terminal
//!   chat; transfers and account closings pause for approval at the prompt.
//! - `banking serve [--addr 127.0.0.1:8080] [--api-key K] [--metrics-open]
//!   [--allowed-host HOST]…`: the agent over HTTP as `bankingAgent`, with
//!   the approval page at `/`.
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
(default: sqlite: $XDG_DATA_HOME/holdpoint/banking.db, created on first use)";

#[derive(clap::Args, Debug)]
struct ChatArgs {
    /// The first message (then the chat goes on reading standard input).
    #[arg(long)]
    message: Option<String>,
    /// `provider/model` (default: the first provider whose key is set, else
    /// the scripted demo model).
    #[arg(long, env = "HOLDPOINT_MODEL")]
    model: Option<String>,
    #[arg(long, env = "HOLDPOINT_STORE", default_value = wiring::DEFAULT_STORE, help = STORE_HELP)]
    store: String,
}

impl Default for ChatArgs {
    fn default() -> Self {
        ChatArgs {
            message: None,
            model: std::env::var("HOLDPOINT_MODEL").ok(),
            store: std::env::var("HOLDPOINT_STORE").unwrap_or_else(|_| wiring::DEFAULT_STORE.to_owned()),
        }
    }
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Where to listen (a non-loopback address needs --api-key).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// `provider/model` (default: the first provider whose key is set, else
    /// the scripted demo model).
    #[arg(long, env = "HOLDPOINT_MODEL")]
    model: Option<String>,
    #[arg(long, env = "HOLDPOINT_STORE", default_value = wiring::DEFAULT_STORE, help = STORE_HELP)]
    store: String,
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

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command.unwrap_or(Command::Chat(ChatArgs::default())) {
        Command::Demo => demo::run().await.map_err(|e| format!("{e} ({})", e.status())),
        Command::Chat(args) => {
            let store = wiring::open_store(&args.store).await?;
            let model = wiring::pick_model(args.model.as_deref())?;
            chat::run(model, store, args.message)
                .await
                .map_err(|e| format!("{e} ({})", e.status()))
        }
        Command::Serve(args) => {
            let api_key = args.api_key.filter(|k| !k.is_empty());
            let listener = serve::bind(&args.addr, api_key.as_deref()).await?;
            let store = wiring::open_store(&args.store).await?;
            let model = wiring::pick_model(args.model.as_deref())?;
            let data_dir = match args.data_dir {
                Some(d) => d,
                None => wiring::data_dir()?,
            };
            serve::run(serve::ServeConfig {
                listener,
                model,
                store,
                api_key,
                data_dir,
                metrics_open: args.metrics_open,
                allowed_hosts: args.allowed_hosts,
                policy: None,
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
