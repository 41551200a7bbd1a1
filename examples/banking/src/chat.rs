//! `banking chat`: a terminal chat whose paused calls are approved at the
//! prompt. With standard input not a terminal, answers are read line by
//! line (`y`, `n REASON`, or JSON for a respond), so it can be scripted.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use banking::{Approval, TransferDetails, banking_agent, transfer_money};
use futures::StreamExt;
use holdpoint::agent::{AgentInit, Connection};
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
    serde_json::from_str::<Value>(line).ok().map(Answer::Json)
}

/// Shows one paused call and builds the directive from the person's answer.
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

fn decide(part: &Part, tools: &[ToolDefinition], input: &mut Input) -> holdpoint::Result<Option<Part>> {
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
    loop {
        let hint = if kind == 2 {
            "answer as JSON"
        } else {
            "y = approve, n REASON = deny"
        };
        let Some(line) = input.ask(&format!("   approve? ({hint}) > ")) else {
            return Ok(None);
        };
        let Some(answer) = parse_answer(&line) else {
            println!("   please answer y, n REASON, or a JSON value");
            continue;
        };
        let directive = match (kind, answer) {
            (0, Answer::Yes) => transfer.interrupted(part).map(|c| c.restart(Some(Approval::yes()))),
            (0, Answer::No(reason)) => transfer
                .interrupted(part)
                .map(|c| c.restart(Some(Approval::no(reason)))),
            (1, Answer::Yes) => ToolApproval::interrupted(part).map(|h| h.approve(None)),
            (1, Answer::No(reason)) => ToolApproval::interrupted(part).map(|h| h.deny(reason.as_deref())),
            (_, Answer::Json(v)) => {
                if let Err(e) = check_output(tools, part, &v) {
                    println!("   that answer does not fit: {e}; try again");
                    continue;
                }
                Some(part.respond(v))
            }
            (_, _) => {
                println!("   this call needs a JSON answer");
                continue;
            }
        };
        return match directive {
            Some(d) => {
                println!(
                    "   {}",
                    if line.starts_with('n') {
                        "✘ denied"
                    } else {
                        "✔ answered"
                    }
                );
                d.map(Some)
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

/// Runs the chat until the input ends. `durable`: the store outlives the
/// process (not `memory:`), so a call left waiting can be answered later.
pub async fn run(
    model: Arc<dyn Model>,
    store: Arc<dyn SessionStore>,
    first: Option<String>,
    durable: bool,
) -> holdpoint::Result<()> {
    let agent = banking_agent(model, Some(store))?;
    let conn = agent.connect(AgentInit::new()).await?;
    let mut input = Input::new();
    println!(
        "session {} — type a request, e.g. \"Transfer $500 to savings\"; Ctrl-D to quit",
        conn.session_id()
    );
    let mut next = first;
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
        loop {
            let (finish, paused) = stream_turn(&conn).await?;
            match finish {
                FinishReason::Interrupted => {
                    let mut directives = Vec::new();
                    for p in &paused {
                        match decide(p, agent.tool_definitions(), &mut input)? {
                            Some(d) => directives.push(d),
                            None if durable => {
                                println!(
                                    "(input ended with a call still waiting; session {} keeps it paused: answer it with `holdpoint pending` and `holdpoint approve`)",
                                    conn.session_id()
                                );
                                return Ok(());
                            }
                            None => {
                                println!(
                                    "(input ended with a call still waiting; with --store memory: it is lost when the chat exits — use a sqlite: store to answer it later)"
                                );
                                return Ok(());
                            }
                        }
                    }
                    conn.send_resume(directives)?;
                }
                FinishReason::Failed => {
                    // A failed turn's output is its error (`Error::TurnFailed`).
                    conn.output().await?;
                    return Ok(());
                }
                _ => break,
            }
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
        assert!(parse_answer("maybe").is_none());
    }
}
