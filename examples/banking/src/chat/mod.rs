//! `banking chat`: a terminal chat whose paused calls are approved at the
//! prompt. With standard input not a terminal, answers are read line by
//! line (`y`, `n REASON`, `e` / `edit AMOUNT`, or JSON for a respond), so
//! it can be scripted. `--session ID` continues a stored session, answering
//! a call it left waiting first.

mod ask;

use std::io::Write;
use std::sync::Arc;

use banking::banking_agent_with_policy;
use futures::StreamExt;
use holdpoint::agent::{AgentInit, Connection, PendingApproval};
use holdpoint::approval::{HoldRule, Policy};
use holdpoint::message::Role;
use holdpoint::session::SessionStore;
use holdpoint::{FinishReason, Model, Part, ToolDefinition};
use serde_json::Value;

use ask::{Decided, Input, call_key, decide};

/// Streams one turn; returns the paused calls if it paused.
async fn stream_turn(conn: &Connection) -> holdpoint::Result<(FinishReason, Vec<Part>)> {
    let mut paused = Vec::new();
    let mut finish = FinishReason::Stop;
    let mut started = false;
    let mut chunks = conn.receive();
    while let Some(chunk) = chunks.next().await {
        if let Some(mc) = &chunk.model_chunk {
            if mc.role == Some(Role::Tool) {
                paused.extend(mc.content.iter().filter(|p| p.is_interrupt()).cloned());
                for r in mc.content.iter().filter_map(Part::as_tool_response) {
                    println!("   ↳ {} answered {}", r.name, r.output.clone().unwrap_or(Value::Null));
                }
            } else {
                if !started {
                    print!("assistant> ");
                    started = true;
                }
                print!("{}", mc.text());
                let _ = std::io::stdout().flush();
            }
        }
        if let Some(end) = &chunk.turn_end {
            finish = end.finish_reason;
        }
    }
    if started {
        println!();
    }
    Ok((finish, paused))
}

/// Where the chat starts: a new session, or one it continues.
pub enum Start {
    /// A new session, with an optional first message.
    New(Option<String>),
    /// The stored session with this id (`--session ID`), then an optional
    /// message.
    Continue(String, Option<String>),
}

/// What answering a turn's paused calls came to.
enum Paused {
    /// Every call answered: the resume was sent.
    Resumed,
    /// A call is left waiting: the chat ends.
    Left,
}

/// Asks about each paused call and sends the resume. `edited`: the calls
/// whose input the person edited in the last answer (said when one is held
/// again).
async fn answer_paused(
    conn: &Connection,
    paused: &[Part],
    tools: &[ToolDefinition],
    input: &mut Input,
    edited: &mut Vec<String>,
    durable: bool,
) -> holdpoint::Result<Paused> {
    let mut directives = Vec::new();
    let was_edited = std::mem::take(edited);
    for p in paused {
        if was_edited.contains(&call_key(p)) {
            let by = HoldRule::on(p)
                .map(|r| {
                    format!(
                        "approval rule {:?} ({} of {})",
                        r.rule,
                        r.quorum,
                        r.approvers.join(", ")
                    )
                })
                .unwrap_or_else(|| "approval".to_owned());
            println!(
                "\n↺  the edited call is held again, for {by}: the approval was for the old input, so it has not run"
            );
        }
        match decide(p, tools, input)? {
            Decided::Answer(d) => directives.push(d),
            Decided::Edited(d) => {
                edited.push(call_key(p));
                directives.push(d);
            }
            Decided::Leave if durable => {
                println!(
                    "(a call is still waiting; session {id} keeps it paused: answer it with `holdpoint pending` and `holdpoint approve`, or continue here with `banking chat --session {id}`)",
                    id = conn.session_id()
                );
                return Ok(Paused::Left);
            }
            Decided::Leave => {
                println!(
                    "(a call is still waiting; with --store memory: it is lost when the chat exits — use a sqlite: store to answer it later)"
                );
                return Ok(Paused::Left);
            }
        }
    }
    conn.send_resume(directives)?;
    Ok(Paused::Resumed)
}

/// Streams turns until one ends without pausing; `false` when a call is
/// left waiting or the turn failed (the chat ends). `edited`: calls the
/// person just edited (the resume is already sent).
async fn drive(
    conn: &Connection,
    tools: &[ToolDefinition],
    input: &mut Input,
    durable: bool,
    mut edited: Vec<String>,
) -> holdpoint::Result<bool> {
    loop {
        let (finish, paused) = stream_turn(conn).await?;
        match finish {
            FinishReason::Interrupted => {
                if let Paused::Left = answer_paused(conn, &paused, tools, input, &mut edited, durable).await? {
                    return Ok(false);
                }
            }
            FinishReason::Failed => {
                // A failed turn's output is its error (`Error::TurnFailed`).
                conn.output().await?;
                return Ok(false);
            }
            _ => {
                if !edited.is_empty() {
                    println!("   (the edited call ran with the new input)");
                }
                return Ok(true);
            }
        }
    }
}

/// Runs the chat until the input ends. `durable`: the store outlives the
/// process (not `memory:`), so a call left waiting can be answered later.
/// `policy`: approval rules (`--config`); a call a rule holds is left to
/// the rule's approvers.
pub async fn run(
    model: Arc<dyn Model>,
    store: Arc<dyn SessionStore>,
    start: Start,
    durable: bool,
    policy: Option<Policy>,
) -> holdpoint::Result<()> {
    let agent = banking_agent_with_policy(model, Some(store), policy)?;
    let tools = agent.tool_definitions().to_vec();
    let mut input = Input::new();
    let (conn, mut next) = match start {
        Start::New(first) => {
            let conn = agent.connect(AgentInit::new()).await?;
            println!(
                "session {} — type a request, e.g. \"Transfer $500 to savings\"; Ctrl-D to quit",
                conn.session_id()
            );
            (conn, first)
        }
        Start::Continue(id, first) => {
            let Some(snapshot) = agent.latest(&id).await? else {
                return Err(holdpoint::Error::NotFound(format!(
                    "session {id} not found in this store (a memory: store forgets sessions when the chat exits; `holdpoint sessions list --store URL` lists them)"
                )));
            };
            let conn = agent.connect(AgentInit::session(id.clone())).await?;
            let messages = snapshot.state.as_ref().map_or(0, |s| s.messages.len());
            println!("session {id} continued ({messages} messages) — Ctrl-D to quit");
            if let Some(reply) = snapshot.state.as_ref().and_then(|s| {
                s.messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::Model && !m.text().trim().is_empty())
            }) {
                println!("assistant> {}", reply.text().trim());
            }
            if snapshot.is_waiting() {
                let paused: Vec<Part> = PendingApproval::of(&snapshot).into_iter().map(|p| p.part).collect();
                println!(
                    "{} call(s) left waiting in snapshot {}",
                    paused.len(),
                    snapshot.snapshot_id
                );
                let mut edited = Vec::new();
                if let Paused::Left = answer_paused(&conn, &paused, &tools, &mut input, &mut edited, durable).await? {
                    return Ok(());
                }
                // The resumed turn, and any pause after it.
                if !drive(&conn, &tools, &mut input, durable, edited).await? {
                    return Ok(());
                }
            } else if snapshot.resume_lapsed(chrono::Utc::now()) {
                println!(
                    "(its last resume was cut off and the call may or may not have run: see `holdpoint in-doubt` and `holdpoint settle`)"
                );
                return Ok(());
            }
            (conn, first)
        }
    };
    loop {
        let message = match next.take() {
            Some(m) => {
                println!("you> {m}");
                m
            }
            None => match input.ask("you> ") {
                Some(m) if m.is_empty() => continue,
                Some(m) => m,
                None => break,
            },
        };
        conn.send_text(message)?;
        if !drive(&conn, &tools, &mut input, durable, Vec::new()).await? {
            return Ok(());
        }
    }
    conn.close();
    Ok(())
}
