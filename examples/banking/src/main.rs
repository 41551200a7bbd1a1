//! `banking`: the seed's banking agent.
//!
//! - `banking chat [--message TEXT] [--model M] [--store URL]`: a terminal
//!   chat; transfers and account closings pause for approval at the prompt.
//! - `banking demo`: the three ways to resume, on the scripted model.

mod chat;
mod demo;

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use holdpoint::Model;
use holdpoint::session::{InMemoryStore, SessionStore};

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
    /// Run the three ways to resume on the scripted model.
    Demo,
}

#[derive(clap::Args, Debug, Default)]
struct ChatArgs {
    /// The first message (then the chat goes on reading standard input).
    #[arg(long)]
    message: Option<String>,
    /// `provider/model` (default: the first provider whose key is set, else
    /// the scripted demo model).
    #[arg(long, env = "HOLDPOINT_MODEL")]
    model: Option<String>,
    /// Session store URL (`memory:`).
    #[arg(long, env = "HOLDPOINT_STORE", default_value = "memory:")]
    store: String,
}

fn pick_model(requested: Option<&str>) -> Result<Arc<dyn Model>, String> {
    match requested {
        Some("scripted") | Some("scripted/banking-demo") => Ok(Arc::new(banking::demo_model())),
        Some(name) => holdpoint_models::resolve_model(name).map_err(|e| format!("model {name}: {e}")),
        None => match holdpoint_models::first_available_provider() {
            Some(name) => {
                eprintln!("using {name} (its key is set; choose another with --model)");
                holdpoint_models::resolve_model(&name).map_err(|e| format!("model {name}: {e}"))
            }
            None => {
                eprintln!(
                    "no provider key set (GEMINI_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY): using the scripted demo model"
                );
                Ok(Arc::new(banking::demo_model()))
            }
        },
    }
}

fn open_store(url: &str) -> Result<Arc<dyn SessionStore>, String> {
    match url {
        "memory:" | "memory" => Ok(Arc::new(InMemoryStore::new())),
        other => Err(format!("unsupported store URL {other:?}: use memory:")),
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command.unwrap_or(Command::Chat(ChatArgs::default())) {
        Command::Demo => demo::run().await.map_err(|e| format!("{e} ({})", e.status())),
        Command::Chat(args) => {
            let model = pick_model(args.model.as_deref())?;
            let store = open_store(&args.store)?;
            chat::run(model, store, args.message)
                .await
                .map_err(|e| format!("{e} ({})", e.status()))
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
