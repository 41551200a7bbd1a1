//! `banking chat`: a terminal chat whose paused calls are approved at the
//! prompt. With standard input not a terminal, answers are read line by
//! line (`y`, `n REASON`, `e` / `edit AMOUNT`, or JSON for a respond), so
//! it can be scripted. `--session ID` continues a stored session, answering
//! a call it left waiting first.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use banking::{Approval, Transfer, TransferDetails, banking_agent_with_policy, parse_amount, transfer_money};
use futures::StreamExt;
use holdpoint::agent::{AgentInit, Connection, PendingApproval};
use holdpoint::approval::{HoldRule, Policy};
use holdpoint::message::Role;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::SessionStore;
use holdpoint::tool::SchemaValidator;
use holdpoint::{FinishReason, Model, Part, ToolDefinition};
use serde_json::Value;

/// Where answers and messages come from.
struct Input {
    interactive: bool,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

impl Input {
    fn new() -> Self {
        let stdin = std::io::stdin();
        Input {
            interactive: stdin.is_terminal(),
            lines: stdin.lock().lines(),
        }
    }

    /// Prompts (when interactive) and reads one line; `None` at end of input.
    fn ask(&mut self, prompt: &str) -> Option<String> {
        if self.interactive {
            print!("{prompt}");
            let _ = std::io::stdout().flush();
        }
        let line = self.lines.next()?.ok()?;
        if !self.interactive {
            println!("{prompt}{line}");
        }
        Some(line.trim().to_owned())
    }
}

enum Answer {
    Yes,
    No(Option<String>),
    /// Edit the amount, then approve: the new amount when given.
    Edit(Option<String>),
    Json(Value),
}

fn parse_answer(line: &str) -> Option<Answer> {
    let lower = line.to_lowercase();
    if matches!(lower.as_str(), "y" | "yes" | "approve" | "a") {
        return Some(Answer::Yes);
    }
    if lower == "n" || lower == "no" || lower.starts_with("n ") || lower.starts_with("no ") || lower.starts_with("deny")
    {
        let reason = line
            .split_once(' ')
            .map(|(_, r)| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        return Some(Answer::No(reason));
    }
    if lower == "e" || lower == "edit" || lower.starts_with("e ") || lower.starts_with("edit ") {
        let amount = line
            .split_once(' ')
            .map(|(_, a)| a.trim().to_owned())
            .filter(|a| !a.is_empty());
        return Some(Answer::Edit(amount));
    }
    serde_json::from_str::<Value>(line).ok().map(Answer::Json)
}

/// Whether `output` can answer the paused call `part` of a tool among
/// `tools`: checked against its output schema here, so a bad answer is
/// asked again instead of failing the resumed turn (the agent refuses it
/// before claiming anything, docs/reference.md §10.10).
fn check_output(tools: &[ToolDefinition], part: &Part, output: &Value) -> holdpoint::Result<()> {
    let name = part.as_tool_request().map(|r| r.name.as_str()).unwrap_or_default();
    match tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.output_schema.clone())
    {
        Some(schema) => SchemaValidator::new(schema).check("answer", output),
        None => Ok(()),
    }
}

/// How a JSON answer is explained wherever the chat offers one.
const RESPOND_HINT: &str = "respond: the tool does not run; this JSON is its result";

/// What the chat did with one paused call.
enum Decided {
    /// Send this directive.
    Answer(Part),
    /// Send this directive: an edited input with the approval (the call
    /// may be held again, for a rule's approvers).
    Edited(Part),
    /// Leave the call waiting (input ended, or only a rule's approvers
    /// may answer it).
    Leave,
}

/// The ref (or, without one, the tool) naming a paused call.
fn call_key(part: &Part) -> String {
    part.as_tool_request()
        .map(|r| r.reference.clone().unwrap_or_else(|| r.name.clone()))
        .unwrap_or_default()
}

/// A new amount for a held transfer, from `given` or asked for: the edited
/// input, or `None` when the input ends.
fn edited_transfer(
    call_input: &Transfer,
    given: Option<String>,
    input: &mut Input,
) -> Option<Result<Transfer, String>> {
    let raw = match given {
        Some(raw) => raw,
        None => input.ask("   new amount > ")?,
    };
    let Some(amount) = parse_amount(&raw).or_else(|| parse_amount(&format!("${}", raw.trim_start_matches('$')))) else {
        return Some(Err(format!("{raw:?} is not an amount (e.g. 400, $1,250.50, 2.5k)")));
    };
    let edited = Transfer {
        amount,
        to_account: call_input.to_account.clone(),
    };
    Some(edited.validate().map(|()| edited).map_err(|e| e.to_string()))
}

/// Shows one paused call and builds the directive from the person's answer.
fn decide(part: &Part, tools: &[ToolDefinition], input: &mut Input) -> holdpoint::Result<Decided> {
    let transfer = transfer_money()?;
    let (question, kind) = if let Some(call) = transfer.interrupted(part) {
        let details: TransferDetails = call.interrupt_as()?;
        (format!("{} (transferMoney)", details.details), 0)
    } else if let Some(hold) = ToolApproval::interrupted(part) {
        (format!("{} with input {}", hold.message, hold.input), 1)
    } else {
        let name = part.as_tool_request().map(|r| r.name.clone()).unwrap_or_default();
        let data = part.interrupt_data().map(Value::Object).unwrap_or(Value::Null);
        (format!("{name} asks: {data}"), 2)
    };
    println!("\n⏸  approval needed: {question}");
    if let Some(rule) = HoldRule::on(part) {
        // The chat is no approver: the rule's approvers answer it.
        println!(
            "   held under approval rule {:?}: {} of {} must approve it (`holdpoint pending`, then `holdpoint approve`)",
            rule.rule,
            rule.quorum,
            rule.approvers.join(", ")
        );
        return Ok(Decided::Leave);
    }
    let hint = match kind {
        0 => format!("y = approve, n REASON = deny, e AMOUNT = edit the amount then approve, or JSON = {RESPOND_HINT}"),
        1 => format!("y = approve, n REASON = deny, or JSON = {RESPOND_HINT}"),
        _ => format!("answer as JSON ({RESPOND_HINT})"),
    };
    println!("   {hint}");
    loop {
        let Some(line) = input.ask("   approve? > ") else {
            return Ok(Decided::Leave);
        };
        let Some(answer) = parse_answer(&line) else {
            println!("   please answer y, n REASON, e AMOUNT, or a JSON value");
            continue;
        };
        let (directive, said) = match (kind, answer) {
            (0, Answer::Yes) => (
                transfer.interrupted(part).map(|c| c.restart(Some(Approval::yes()))),
                "✔ approved",
            ),
            (0, Answer::No(reason)) => (
                transfer
                    .interrupted(part)
                    .map(|c| c.restart(Some(Approval::no(reason)))),
                "✘ denied",
            ),
            (0, Answer::Edit(given)) => {
                let Some(call) = transfer.interrupted(part) else {
                    return Err(holdpoint::Error::Internal(
                        "the paused call could not be claimed".into(),
                    ));
                };
                // An amount the transfer refuses is asked for again.
                let mut given = given;
                let edited = loop {
                    match edited_transfer(&call.input, given.take(), input) {
                        None => return Ok(Decided::Leave),
                        Some(Err(why)) => println!("   {why}; enter another amount"),
                        Some(Ok(t)) => break t,
                    }
                };
                println!(
                    "   ✎ edited: ${:.2} to {} instead of ${:.2}, and approved",
                    edited.amount, edited.to_account, call.input.amount
                );
                return call
                    .restart_with_input(edited, Some(Approval::yes()))
                    .map(Decided::Edited);
            }
            (1, Answer::Yes) => (ToolApproval::interrupted(part).map(|h| h.approve(None)), "✔ approved"),
            (1, Answer::No(reason)) => (
                ToolApproval::interrupted(part).map(|h| h.deny(reason.as_deref())),
                "✘ denied",
            ),
            (_, Answer::Json(v)) => {
                if let Err(e) = check_output(tools, part, &v) {
                    println!("   that answer does not fit: {e}; try again");
                    continue;
                }
                (
                    Some(part.respond(v)),
                    "✔ answered: the tool does not run; the model gets this JSON as its result",
                )
            }
            (_, Answer::Edit(_)) => {
                println!("   only a transfer's amount can be edited here (`holdpoint approve --input` edits any call)");
                continue;
            }
            (_, _) => {
                println!("   this call needs a JSON answer");
                continue;
            }
        };
        return match directive {
            Some(d) => {
                println!("   {said}");
                d.map(Decided::Answer)
            }
            None => Err(holdpoint::Error::Internal(
                "the paused call could not be claimed".into(),
            )),
        };
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert!(matches!(parse_answer("y"), Some(Answer::Yes)));
        assert!(matches!(parse_answer("n too much"), Some(Answer::No(Some(r))) if r == "too much"));
        assert!(matches!(parse_answer("no"), Some(Answer::No(None))));
        assert!(matches!(parse_answer("{\"a\":1}"), Some(Answer::Json(_))));
        assert!(matches!(parse_answer("e"), Some(Answer::Edit(None))));
        assert!(matches!(parse_answer("edit 400"), Some(Answer::Edit(Some(a))) if a == "400"));
        assert!(matches!(parse_answer("E $1,000"), Some(Answer::Edit(Some(a))) if a == "$1,000"));
        assert!(parse_answer("maybe").is_none());
    }
}
