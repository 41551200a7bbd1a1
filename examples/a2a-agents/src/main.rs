//! Agent to agent over A2A, with a hold crossing it (README.md).
//!
//! Two Holdpoint agents, offline (scripted models): `bank` is served over
//! HTTP on loopback — its A2A endpoint `/agents/bank/a2a` — and its
//! `transferMoney` waits for a person's approval (ToolApproval). The
//! `frontDesk` agent's tool `bank` is that remote agent
//! ([`holdpoint_a2a::A2aAgentTool`]). Asked for a wire, the bank's task
//! stops at `input-required`; that becomes the front desk's hold, kept in
//! a SQLite file. The front desk is then dropped and rebuilt on the same
//! file (a restart), and an approver's answer — approve, or `--deny` —
//! goes back on the bank's task, which runs (or cancels) the transfer.
//!
//! `--remote URL` calls another A2A agent instead of starting the bank
//! (e.g. the SDK-built one of crates/holdpoint-a2a/tests/sdk-server).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::ToolContext;
use holdpoint::agent::{Agent, Answer, Answered, Caller};
use holdpoint::message::{PartKind, Role};
use holdpoint::middleware::ToolApproval;
use holdpoint::model::FinishReason;
use holdpoint::session::InMemoryStore;
use holdpoint::tool::tool;
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_a2a::A2aAgentTool;
use holdpoint_store_sqlite::SqliteStore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What can stop the example.
#[derive(Debug, thiserror::Error)]
enum ExampleError {
    /// Holdpoint refused or failed.
    #[error(transparent)]
    Holdpoint(#[from] holdpoint::Error),
    /// The A2A tool's configuration.
    #[error(transparent)]
    A2a(#[from] holdpoint_a2a::A2aError),
    /// The bank's server did not build.
    #[error(transparent)]
    Server(#[from] holdpoint_server::BuildError),
    /// Sockets, temporary files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The command line, or a turn that did not go as the example expects.
    #[error("{0}")]
    Usage(String),
}

/// A transfer the bank's model asks for.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Transfer {
    /// Where the money goes.
    to: String,
    /// How many dollars.
    amount: u32,
}

/// A scripted model: the tool's output comes back as `{prefix}: {output}`;
/// a user's text becomes `on_text(text)`.
fn scripted(
    name: &str,
    prefix: &'static str,
    on_text: impl Fn(&str) -> ScriptedTurn + Send + Sync + 'static,
) -> ScriptedModel {
    ScriptedModel::from_fn(name.to_owned(), move |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let said: Vec<String> = last
                .content
                .iter()
                .filter_map(|p| match &p.kind {
                    PartKind::ToolResponse(r) => Some(r.output.clone().unwrap_or(Value::Null).to_string()),
                    _ => None,
                })
                .collect();
            return Some(ScriptedTurn::text(format!("{prefix}: {}", said.join(" "))));
        }
        Some(on_text(&last.text()))
    })
}

/// The bank, served on loopback; its A2A endpoint, the count of transfers
/// it made, and the sender that stops it.
async fn serve_bank() -> Result<(String, Arc<AtomicUsize>, tokio::sync::oneshot::Sender<()>), ExampleError> {
    let transfers = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&transfers);
    let transfer = tool(
        "transferMoney",
        "Moves money to an account",
        move |_ctx: ToolContext, t: Transfer| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"transferred": t.amount, "to": t.to}))
            }
        },
    );
    let bank = Agent::builder("bank")
        .description("Moves money after a person approves")
        .model(Arc::new(scripted("scripted/bank", "done", |_| {
            ScriptedTurn::tool_call("transferMoney", json!({"to": "acct-4471", "amount": 200}))
        })))
        .tool(transfer)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(Arc::new(InMemoryStore::new()))
        .build()?;
    let server = holdpoint_server::Server::builder().agent(bank).build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        holdpoint_server::serve(listener, &server, async move {
            let _ = stopped.await;
        })
        .await
    });
    Ok((format!("http://{addr}/agents/bank/a2a"), transfers, stop))
}

/// The front desk (a new one per "process"), its sessions in the SQLite
/// file at `path`, its `bank` tool the remote agent at `url`.
async fn front_desk(path: &std::path::Path, url: &str) -> Result<Agent, ExampleError> {
    let store = SqliteStore::open(path).await?;
    let bank = A2aAgentTool::new("bank", "The bank's agent, over A2A", url)?;
    Ok(Agent::builder("frontDesk")
        .model(Arc::new(scripted("scripted/frontDesk", "the bank says", |text| {
            ScriptedTurn::tool_call("bank", json!({"input": text}))
        })))
        .tool(bank)
        .store(Arc::new(store))
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), ExampleError> {
    let mut deny = false;
    let mut remote = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--deny" => deny = true,
            "--remote" => remote = args.next(),
            other => {
                return Err(ExampleError::Usage(format!(
                    "unknown argument {other:?}; usage: a2a-agents [--deny] [--remote URL]"
                )));
            }
        }
    }
    let (url, transfers, _stop) = match remote {
        Some(url) => (url, None, None),
        None => {
            let (url, transfers, stop) = serve_bank().await?;
            (url, Some(transfers), Some(stop))
        }
    };
    println!("the remote agent: {url}");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("front-desk.db");

    // 1. The front desk asks; the remote task waits; the front desk holds.
    let desk = front_desk(&path, &url).await?;
    let out = desk.run_text("wire $200 to acct-4471").await?;
    if out.finish_reason != FinishReason::Interrupted {
        return Err(ExampleError::Usage(format!("expected a hold, got: {}", out.text())));
    }
    let snapshot = out
        .snapshot_id
        .clone()
        .ok_or_else(|| ExampleError::Usage("the held turn has no snapshot".into()))?;
    for part in out.interrupts() {
        let data = part.interrupt_data().unwrap_or_default();
        println!("held at the front desk: {}", data["message"]);
        println!("  the remote task: {} (context {})", data["taskId"], data["contextId"]);
        for asked in data["question"]["data"].as_array().into_iter().flatten() {
            println!("  it asks: {asked}");
        }
    }
    drop(desk);

    // 2. A restart: a new front desk on the same file. An approver answers.
    let desk = front_desk(&path, &url).await?;
    let answer = if deny {
        Answer::deny(snapshot, Some("not this account"))
    } else {
        Answer::approve(snapshot)
    };
    println!(
        "after a restart, the approver {}",
        if deny { "denies" } else { "approves" }
    );
    match desk.decisions().answer(answer, Caller::anonymous()).await? {
        Answered::Resumed(out) => println!("the front desk: {}", out.text()),
        other => return Err(ExampleError::Usage(format!("not resumed: {other:?}"))),
    }
    if let Some(transfers) = transfers {
        println!("transfers the bank made: {}", transfers.load(Ordering::SeqCst));
    }
    Ok(())
}
