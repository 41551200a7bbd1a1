//! The offline scripted model that plays the bank's assistant: it reads a
//! transfer, a balance question or a closing out of the user's text and
//! streams its replies word by word.

use std::time::Duration;

use holdpoint::message::{Message, Part, PartKind, Role};
use holdpoint::{GenerateRequest, GenerateResponse, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

use crate::Transfer;

/// Reads an amount of dollars the way people write one: `$500`,
/// `$1,000,000`, `1000000 dollars`, `1.5k`, `1m`, `2 million`, `$3.5bn`.
/// The first amount in `text`; `None` when it has none. A bare number
/// counts only when it is all of `text` (so "savings 2" is not an amount
/// but the answer "400" is).
pub fn parse_amount(text: &str) -> Option<f64> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        let dollar_sign = word.starts_with('$') || word.starts_with("usd");
        let word = word.trim_start_matches("usd").trim_start_matches('$');
        let digits: String = word
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
            .filter(|c| *c != ',')
            .collect();
        let digits = digits.trim_end_matches('.');
        if digits.is_empty() {
            continue;
        }
        let Ok(number) = digits.parse::<f64>() else { continue };
        // What follows the digits, in this word or the next.
        let rest = word[word
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .unwrap_or(word.len())..]
            .trim_matches(|c: char| !c.is_alphanumeric());
        let next = words
            .get(i + 1)
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .unwrap_or("");
        let scale = |unit: &str| match unit {
            "k" | "thousand" => Some(1e3),
            "m" | "mm" | "million" | "mil" => Some(1e6),
            "b" | "bn" | "billion" => Some(1e9),
            _ => None,
        };
        let (factor, unit_word) = match (scale(rest), scale(next)) {
            (Some(f), _) => (f, false),
            (None, Some(f)) if rest.is_empty() => (f, true),
            _ => (1.0, false),
        };
        let after = if unit_word {
            words.get(i + 2).copied().unwrap_or("")
        } else {
            next
        };
        let says_dollars = |w: &str| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            matches!(w, "dollar" | "dollars" | "usd" | "bucks")
        };
        let is_amount = dollar_sign
            || factor != 1.0
            || says_dollars(rest)
            || says_dollars(after)
            || (words.len() == 1 && rest.is_empty());
        if is_amount {
            return Some(number * factor);
        }
    }
    None
}

/// The account a transfer goes to: the first word after " to " that is
/// not a possessive or an article ("to my savings account": savings).
fn destination(segment: &str) -> Option<String> {
    segment
        .split(" to ")
        .nth(1)
        .and_then(|rest| {
            rest.split_whitespace()
                .find(|w| !matches!(*w, "my" | "our" | "your" | "the" | "a"))
        })
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .filter(|w| !w.is_empty())
}

/// The transfers a message asks for: "transfer $5 to savings and $7 to
/// checking" is two (each part joined by "and" or a comma that names an
/// amount is one; a part without an account goes where the next one
/// does, else to savings). Empty when the message asks for none.
fn parse_transfers(text: &str) -> Vec<Transfer> {
    let lower = text.to_lowercase();
    if !lower.contains("transfer") && !lower.contains("send") && !lower.contains("move") && !lower.contains("pay") {
        return Vec::new();
    }
    let mut parts: Vec<(f64, Option<String>)> = Vec::new();
    for segment in lower.split(" and ").flat_map(|s| s.split(", ")) {
        match parse_amount(segment) {
            Some(amount) => parts.push((amount, destination(segment))),
            // "… and then to checking": an account without an amount
            // belongs to the amount before it.
            None => {
                if let (Some(last), Some(to)) = (parts.last_mut(), destination(segment))
                    && last.1.is_none()
                {
                    last.1 = Some(to);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut later: Option<String> = None;
    for (amount, to) in parts.into_iter().rev() {
        let to_account = to.or_else(|| later.clone()).unwrap_or_else(|| "savings".to_owned());
        later = Some(to_account.clone());
        out.push(Transfer { amount, to_account });
    }
    out.reverse();
    out
}

#[cfg(test)]
fn parse_transfer(text: &str) -> Option<Transfer> {
    parse_transfers(text).into_iter().next()
}

fn reply_to_tools(parts: &[Part]) -> String {
    let mut lines = Vec::new();
    for p in parts {
        let PartKind::ToolResponse(r) = &p.kind else { continue };
        let out = r.output.clone().unwrap_or(Value::Null);
        match r.name.as_str() {
            "transferMoney" => match out.get("transactionId").and_then(Value::as_str) {
                Some(txn) if out["success"] == json!(true) => lines.push(format!("Done: {txn}")),
                _ => {
                    let why = out
                        .get("error")
                        .and_then(Value::as_str)
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default();
                    lines.push(format!("The transfer was not made{why}."));
                }
            },
            "closeAccount" => match out.get("closed").and_then(Value::as_str) {
                Some(acct) => lines.push(format!("Your {acct} account is closed.")),
                None => lines.push(format!(
                    "The account was not closed ({}).",
                    out.get("error").and_then(Value::as_str).unwrap_or("no reason given")
                )),
            },
            "getBalance" => lines.push(format!(
                "Your {} balance is ${:.2}.",
                out["account"].as_str().unwrap_or("account"),
                out["balance"].as_f64().unwrap_or(0.0)
            )),
            other => lines.push(format!("{other} answered {out}.")),
        }
    }
    lines.join(" ")
}

/// How long the demo model takes per streamed word: enough for a chat to
/// show the reply arriving, short enough not to slow anything down.
pub const DEMO_WORD_DELAY: Duration = Duration::from_millis(30);

/// A text answer streamed word by word, spaced like a real model's.
pub(crate) fn streamed(text: String) -> ScriptedTurn {
    ScriptedTurn::streamed_text(text.split_inclusive(' ')).chunk_delay(DEMO_WORD_DELAY)
}

fn demo_turn(request: &GenerateRequest) -> ScriptedTurn {
    let Some(last) = request.messages.last() else {
        return streamed("How can I help?".into());
    };
    if last.role == Role::Tool {
        return streamed(reply_to_tools(&last.content));
    }
    let text = last.text();
    let transfers = parse_transfers(&text);
    if !transfers.is_empty() {
        // One call per transfer, in one model message (refs assigned by
        // the agent tell them apart).
        let calls = transfers
            .iter()
            .map(|t| {
                Part::tool_request(
                    "transferMoney",
                    None,
                    Some(json!({ "amount": t.amount, "toAccount": t.to_account })),
                )
            })
            .collect();
        return ScriptedTurn::response(GenerateResponse::from_message(Message::new(Role::Model, calls)));
    }
    if text.to_lowercase().contains("close") {
        let account = if text.to_lowercase().contains("savings") {
            "savings"
        } else {
            "checking"
        };
        return ScriptedTurn::tool_call("closeAccount", json!({ "account": account }));
    }
    if text.to_lowercase().contains("balance") {
        let account = if text.to_lowercase().contains("savings") {
            "savings"
        } else {
            "checking"
        };
        return ScriptedTurn::tool_call("getBalance", json!({ "account": account }));
    }
    streamed(
        "I can check a balance, transfer money (one or more transfers in a message: \"Transfer $500 to savings and $1.5k to checking\") or close an account."
            .into(),
    )
}

/// An offline model that plays the bank's assistant: it asks for
/// `transferMoney` when the user asks to transfer `$N to ACCOUNT` (once
/// per transfer: "$5 to savings and $7 to checking" is two calls; amounts
/// as `$1,000,000`, `1000000 dollars`, `1m` or `2.5k`), for
/// `getBalance` when they ask for a balance, and reports tool results.
pub fn demo_model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/banking-demo", |request, _| Some(demo_turn(request))).without_recording()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use std::sync::Arc;

    use holdpoint::agent::AgentInit;

    use super::*;
    use crate::banking_agent;

    /// The demo model's replies stream word by word, each word when the
    /// model sends it (tokio's paused clock: exact spacing, no real wait).
    #[tokio::test(start_paused = true)]
    async fn the_demo_model_streams_its_replies_word_by_word() {
        let agent = banking_agent(Arc::new(demo_model()), None).unwrap();
        let conn = agent.connect(AgentInit::new()).await.unwrap();
        let sent = tokio::time::Instant::now();
        conn.send_text("hello").unwrap();
        let mut words = Vec::new();
        let mut stream = conn.receive();
        while let Some(chunk) = stream.next().await {
            if let Some(mc) = chunk.model_chunk {
                words.push((mc.text(), sent.elapsed()));
            }
        }
        assert!(words.len() > 5, "{words:?}");
        assert_eq!(words[0].0, "I ");
        for (i, (_, at)) in words.iter().enumerate() {
            assert!(*at >= DEMO_WORD_DELAY * (i as u32 + 1), "word {i} at {at:?}");
        }
        let text: String = words.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(conn.output().await.unwrap().text(), text);
    }

    #[test]
    fn reads_amounts_as_people_write_them() {
        for (text, amount) in [
            ("transfer 1000000 dollars to savings", 1_000_000.0),
            ("transfer $1,000,000 to savings", 1_000_000.0),
            ("send 1m to savings", 1_000_000.0),
            ("send $2.5k to bob", 2_500.0),
            ("move 3 million dollars to checking", 3_000_000.0),
            ("pay 40 bucks to bob", 40.0),
            ("transfer $400.", 400.0),
            ("400", 400.0),
            ("$1,250.50", 1250.5),
        ] {
            assert_eq!(parse_amount(text), Some(amount), "{text}");
        }
        assert_eq!(parse_amount("transfer to savings 2"), None);
        assert_eq!(parse_amount("what is my balance"), None);
    }

    #[test]
    fn reads_two_transfers_in_one_message() {
        assert_eq!(
            parse_transfers("transfer $5 to savings and $7 to checking"),
            vec![
                Transfer {
                    amount: 5.0,
                    to_account: "savings".into()
                },
                Transfer {
                    amount: 7.0,
                    to_account: "checking".into()
                },
            ]
        );
        let both = parse_transfers("send $5 and $7 to bob");
        assert_eq!(both.len(), 2, "{both:?}");
        assert!(both.iter().all(|t| t.to_account == "bob"), "{both:?}");
        assert_eq!(parse_transfers("transfer $1m to savings and then to checking").len(), 1);
    }

    /// The demo model asks for two calls for two transfers; both pause.
    #[tokio::test]
    async fn two_transfers_in_one_message_are_two_paused_calls() {
        let agent = banking_agent(Arc::new(demo_model()), None).unwrap();
        let out = agent
            .run(
                holdpoint::agent::AgentInput::text("transfer $5 to savings and $7 to checking"),
                AgentInit::new(),
            )
            .await
            .unwrap();
        let details: Vec<String> = out
            .interrupts()
            .iter()
            .map(|p| p.interrupt_data().unwrap()["details"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(details, ["Transfer $5.00 to savings", "Transfer $7.00 to checking"]);
    }

    #[test]
    fn parses_transfers() {
        assert_eq!(
            parse_transfer("Transfer $500 to savings"),
            Some(Transfer {
                amount: 500.0,
                to_account: "savings".into()
            })
        );
        assert_eq!(parse_transfer("send $1,250.50 to bob please").unwrap().amount, 1250.5);
        assert_eq!(parse_transfer("what is my balance"), None);
        assert_eq!(
            parse_transfer("Transfer $500 to my savings account.")
                .unwrap()
                .to_account,
            "savings"
        );
    }
}
