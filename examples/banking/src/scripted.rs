//! The offline scripted model that plays the bank's assistant: it reads a
//! transfer, a balance question or a closing out of the user's text and
//! streams its replies word by word.

use std::time::Duration;

use holdpoint::message::{Part, PartKind, Role};
use holdpoint::{GenerateRequest, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

use crate::Transfer;

fn parse_transfer(text: &str) -> Option<Transfer> {
    let lower = text.to_lowercase();
    if !lower.contains("transfer") && !lower.contains("send") {
        return None;
    }
    let dollar = lower.find('$')?;
    let digits: String = lower[dollar + 1..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    let amount: f64 = digits.parse().ok()?;
    let to_account = lower
        .split(" to ")
        .nth(1)
        // "to my savings account": the account is the first word that is
        // not a possessive or an article.
        .and_then(|rest| {
            rest.split_whitespace()
                .find(|w| !matches!(*w, "my" | "our" | "your" | "the" | "a"))
        })
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "savings".to_owned());
    Some(Transfer { amount, to_account })
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
    if let Some(t) = parse_transfer(&text) {
        return ScriptedTurn::tool_call(
            "transferMoney",
            json!({ "amount": t.amount, "toAccount": t.to_account }),
        );
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
    streamed("I can check a balance, transfer money or close an account, e.g. \"Transfer $500 to savings\".".into())
}

/// An offline model that plays the bank's assistant: it asks for
/// `transferMoney` when the user asks to transfer `$N to ACCOUNT`, for
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
