//! `banking demo`: the seed's flow, three ways. A transfer pauses for
//! approval, the caller approves, the turn ends with a transaction id.
//!
//! 1. one streaming connection (server-managed session);
//! 2. separate single-turn runs, resumed by session id (as a later HTTP
//!    request or another replica would);
//! 3. client-managed state handed back and forth.

use std::io::Write;
use std::sync::Arc;

use banking::{Approval, TransferDetails, banking_agent, demo_model, transfer_money};
use futures::StreamExt;
use holdpoint::agent::{AgentInit, AgentInput, AgentOutput};
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::{FinishReason, Part, Resume, Role};

const REQUEST: &str = "Transfer $500 to savings";

fn approve(paused: &Part) -> holdpoint::Result<Part> {
    let tool = transfer_money()?;
    let call = tool
        .interrupted(paused)
        .ok_or_else(|| holdpoint::Error::InvalidArgument("not a paused transfer".into()))?;
    let details: TransferDetails = call.interrupt_as()?;
    println!(
        "  ⏸  approval needed: {} (amount {:.2}, to {})",
        details.details, call.input.amount, call.input.to_account
    );
    println!("  ✔  approved");
    call.restart(Some(Approval::yes()))
}

/// Fails unless the turn finished.
fn finished(out: &AgentOutput) -> holdpoint::Result<()> {
    if out.finish_reason != FinishReason::Stop {
        return Err(holdpoint::Error::Internal(format!(
            "expected the turn to finish, got {} ({:?})",
            out.finish_reason.as_str(),
            out.error
        )));
    }
    Ok(())
}

/// Prints the reply of a finished turn.
fn finish(out: &AgentOutput) -> holdpoint::Result<()> {
    finished(out)?;
    println!("  assistant: {}", out.text());
    Ok(())
}

async fn over_a_connection(store: Arc<dyn SessionStore>) -> holdpoint::Result<()> {
    println!("1. one streaming connection");
    let agent = banking_agent(Arc::new(demo_model()), Some(store))?;
    let conn = agent.connect(AgentInit::new()).await?;
    println!("  user: {REQUEST}");
    conn.send_text(REQUEST)?;
    let mut paused = Vec::new();
    let mut chunks = conn.receive();
    while let Some(chunk) = chunks.next().await {
        if let Some(end) = &chunk.turn_end {
            println!("  (turn ended: {})", end.finish_reason.as_str());
        } else if let Some(mc) = &chunk.model_chunk {
            paused.extend(mc.content.iter().filter(|p| p.is_interrupt()).cloned());
        }
    }
    let directives = paused.iter().map(approve).collect::<holdpoint::Result<Vec<_>>>()?;
    conn.send_resume(directives)?;
    // The reply streams: print each piece as it arrives.
    print!("  assistant: ");
    let mut chunks = conn.receive();
    while let Some(chunk) = chunks.next().await {
        if let Some(mc) = chunk.model_chunk.as_ref().filter(|mc| mc.role == Some(Role::Model)) {
            print!("{}", mc.text());
            let _ = std::io::stdout().flush();
        }
    }
    println!();
    finished(&conn.output().await?)
}

async fn by_session_id(store: Arc<dyn SessionStore>) -> holdpoint::Result<()> {
    println!("2. single-turn runs, resumed by session id");
    let agent = banking_agent(Arc::new(demo_model()), Some(store))?;
    println!("  user: {REQUEST}");
    let first = agent.run(AgentInput::text(REQUEST), AgentInit::new()).await?;
    println!(
        "  (paused; session {}, snapshot {})",
        first.session_id,
        first.snapshot_id.as_deref().unwrap_or("-")
    );
    let directives = first
        .interrupts()
        .iter()
        .map(approve)
        .collect::<holdpoint::Result<Vec<_>>>()?;
    let resume = AgentInput::resume(Resume::from_parts(directives));
    let done = agent.run(resume, AgentInit::session(first.session_id.clone())).await?;
    finish(&done)
}

async fn with_client_state() -> holdpoint::Result<()> {
    println!("3. client-managed state");
    let agent = banking_agent(Arc::new(demo_model()), None)?;
    println!("  user: {REQUEST}");
    let first = agent.run(AgentInput::text(REQUEST), AgentInit::new()).await?;
    let state = first
        .state
        .clone()
        .ok_or_else(|| holdpoint::Error::Internal("client-managed output has no state".into()))?;
    println!(
        "  (paused; the caller now holds the state: {} bytes)",
        state.to_string().len()
    );
    let directives = first
        .interrupts()
        .iter()
        .map(approve)
        .collect::<holdpoint::Result<Vec<_>>>()?;
    let resume = AgentInput::resume(Resume::from_parts(directives));
    finish(&agent.run(resume, AgentInit::state(state)).await?)
}

/// Runs the three flows on the scripted model and an in-memory store.
pub async fn run() -> holdpoint::Result<()> {
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    println!("Holdpoint banking demo (scripted model, in-memory store)\n");
    over_a_connection(Arc::clone(&store)).await?;
    println!();
    by_session_id(Arc::clone(&store)).await?;
    println!();
    with_client_state().await
}
