//! Asking the person at the terminal about one paused call: the question
//! it asks, the answers the chat offers for its kind, and the directive
//! built from the answer.

use std::io::{BufRead, IsTerminal, Write};

use banking::{Approval, Transfer, TransferDetails, parse_amount, transfer_money};
use holdpoint::approval::HoldRule;
use holdpoint::middleware::ToolApproval;
use holdpoint::tool::SchemaValidator;
use holdpoint::{Part, ToolDefinition};
use serde_json::Value;

/// Where answers and messages come from.
pub(super) struct Input {
    interactive: bool,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

impl Input {
    pub(super) fn new() -> Self {
        let stdin = std::io::stdin();
        Input {
            interactive: stdin.is_terminal(),
            lines: stdin.lock().lines(),
        }
    }

    /// Prompts (when interactive) and reads one line; `None` at end of input.
    pub(super) fn ask(&mut self, prompt: &str) -> Option<String> {
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

pub(super) enum Answer {
    Yes,
    No(Option<String>),
    /// Edit the amount, then approve: the new amount when given.
    Edit(Option<String>),
    Json(Value),
}

pub(super) fn parse_answer(line: &str) -> Option<Answer> {
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
pub(super) fn check_output(tools: &[ToolDefinition], part: &Part, output: &Value) -> holdpoint::Result<()> {
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
pub(super) const RESPOND_HINT: &str = "respond: the tool does not run; this JSON is its result";

/// What the chat did with one paused call.
pub(super) enum Decided {
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
pub(super) fn call_key(part: &Part) -> String {
    part.as_tool_request()
        .map(|r| r.reference.clone().unwrap_or_else(|| r.name.clone()))
        .unwrap_or_default()
}

/// A new amount for a held transfer, from `given` or asked for: the edited
/// input, or `None` when the input ends.
pub(super) fn edited_transfer(
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
pub(super) fn decide(part: &Part, tools: &[ToolDefinition], input: &mut Input) -> holdpoint::Result<Decided> {
    let transfer = transfer_money()?;
    let (question, kind) = describe(part, &transfer)?;
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
        Kind::Transfer => {
            format!("y = approve, n REASON = deny, e AMOUNT = edit the amount then approve, or JSON = {RESPOND_HINT}")
        }
        Kind::Approval => format!("y = approve, n REASON = deny, or JSON = {RESPOND_HINT}"),
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
            (Kind::Transfer, Answer::Yes) => (
                transfer.interrupted(part).map(|c| c.restart(Some(Approval::yes()))),
                "✔ approved",
            ),
            (Kind::Transfer, Answer::No(reason)) => (
                transfer
                    .interrupted(part)
                    .map(|c| c.restart(Some(Approval::no(reason)))),
                "✘ denied",
            ),
            (Kind::Transfer, Answer::Edit(given)) => return edit(part, &transfer, given, input),
            (Kind::Approval, Answer::Yes) => (ToolApproval::interrupted(part).map(|h| h.approve(None)), "✔ approved"),
            (Kind::Approval, Answer::No(reason)) => (
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

/// What kind of hold a paused call is, for the answers the chat offers.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// A `transferMoney` hold: yes, no, an edited amount, or JSON.
    Transfer,
    /// A `ToolApproval` hold: yes, no, or JSON.
    Approval,
    /// Any other hold: JSON only.
    Other,
}

/// The transfer tool as the chat reads its holds.
pub(super) type TransferTool = holdpoint::ResumableTool<Transfer, banking::TransferResult, Approval>;

/// The question a paused call asks, and its kind.
pub(super) fn describe(part: &Part, transfer: &TransferTool) -> holdpoint::Result<(String, Kind)> {
    Ok(if let Some(call) = transfer.interrupted(part) {
        let details: TransferDetails = call.interrupt_as()?;
        (format!("{} (transferMoney)", details.details), Kind::Transfer)
    } else if let Some(hold) = ToolApproval::interrupted(part) {
        (format!("{} with input {}", hold.message, hold.input), Kind::Approval)
    } else {
        let name = part.as_tool_request().map(|r| r.name.clone()).unwrap_or_default();
        let data = part.interrupt_data().map(Value::Object).unwrap_or(Value::Null);
        (format!("{name} asks: {data}"), Kind::Other)
    })
}

/// An edited transfer, approved: the amount asked for until the transfer
/// accepts it (`given`: the one typed with `e`).
pub(super) fn edit(
    part: &Part,
    transfer: &TransferTool,
    given: Option<String>,
    input: &mut Input,
) -> holdpoint::Result<Decided> {
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
    call.restart_with_input(edited, Some(Approval::yes()))
        .map(Decided::Edited)
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
