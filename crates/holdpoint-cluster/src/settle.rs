//! The operator settles calls in doubt (docs/reference.md §8) against the
//! ledger, the transfer tool's own table: `respond` with the tool's output
//! when the transfer is in it (it ran), `restart` with the approval when it
//! is not (it did not), and `respond` with a refusal for a denied one.
//!
//! Two levels (§16.4): a sub-agent's call in doubt is settled on the child
//! agent first; the root's call that surfaced it is then settled with a
//! `respond` to the root's own sub-agent call carrying the child's answer.
//! A root whose child was never claimed (its resume died before reaching
//! the child) is settled like a call of its own: the child's hold is
//! restarted through it.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Error;
use crate::plan::{self, OPERATOR_KEY};
use crate::shared::Shared;

/// The agents whose calls may be in doubt: the child agent first.
const AGENTS: [&str; 2] = ["bankingAgent", "supportAgent"];
/// Listing rounds: a settlement may leave a child's call in doubt behind it.
const ROUNDS: usize = 6;

/// Tallies of the settlement.
#[derive(Default)]
struct Tally {
    listed: usize,
    respond: usize,
    restart: usize,
    refused: Vec<Value>,
    calls: Vec<Value>,
    /// The answer each settled child snapshot ended with, by its id.
    children: HashMap<String, Value>,
}

/// Lists the calls in doubt of both agents as the operator and settles
/// each; returns what was listed, settled and refused, and `failed`: the
/// calls still listed after the last round.
pub async fn settle(shared: &Shared, db: &sqlx::PgPool) -> Result<Value, Error> {
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let mut any = false;
        for agent in AGENTS {
            for item in in_doubt(shared, agent).await? {
                any = true;
                let known = tally
                    .calls
                    .iter()
                    .any(|c| c["snapshotId"] == item["snapshotId"] && c["ref"] == item["ref"]);
                if round == 0 || !known {
                    tally.listed += 1;
                }
                tally
                    .calls
                    .push(json!({"agent": agent, "snapshotId": item["snapshotId"], "ref": item["ref"]}));
                settle_one(shared, db, agent, &item, &mut tally).await?;
            }
        }
        if !any {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let mut failed = 0;
    for agent in AGENTS {
        failed += in_doubt(shared, agent).await?.len();
    }
    Ok(json!({
        "listed": tally.listed,
        "settledRespond": tally.respond,
        "settledRestart": tally.restart,
        "refused": tally.refused,
        "failed": failed,
        "calls": tally.calls,
    }))
}

/// `agent`'s calls in doubt, as the operator reads them.
async fn in_doubt(shared: &Shared, agent: &str) -> Result<Vec<Value>, Error> {
    let r = shared
        .http
        .get(format!("{}/agents/{agent}/inDoubt?limit=1000", shared.proxy))
        .header("x-api-key", OPERATOR_KEY)
        .send()
        .await?;
    let body: Value = r.json().await?;
    Ok(body["result"].as_array().cloned().unwrap_or_default())
}

/// Settles one listed call in doubt, by what the ledger says of its account.
async fn settle_one(
    shared: &Shared,
    db: &sqlx::PgPool,
    agent: &str,
    item: &Value,
    tally: &mut Tally,
) -> Result<(), Error> {
    let part = item.get("part").cloned().unwrap_or(Value::Null);
    let request = &part["toolRequest"];
    let tool = request["name"].as_str().unwrap_or("");
    let account = request["input"]["toAccount"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| request["input"]["input"].as_str().and_then(plan::account_in_text))
        .unwrap_or_default();
    shared.saw(&account);
    let ran: i64 = sqlx::query_scalar("SELECT count(*) FROM banking_ledger WHERE to_account = $1")
        .bind(&account)
        .fetch_one(db)
        .await
        .unwrap_or(0);
    // A surfaced hold whose child was settled: answer the root's own call.
    let settled_child = item["path"]
        .as_array()
        .and_then(|p| p.first())
        .and_then(|step| Some((step, tally.children.get(step["snapshotId"].as_str()?)?)));
    let resume = match settled_child {
        Some((step, answer)) => json!({"respond": [{"toolResponse": {
            "name": step["tool"], "ref": step["ref"], "output": answer
        }}]}),
        None => resume_for(&part, tool, ran > 0, plan::approves(&account)),
    };
    let is_respond = resume.get("respond").is_some();
    let r = shared
        .http
        .post(format!("{}/agents/{agent}/settle", shared.proxy))
        .header("x-api-key", OPERATOR_KEY)
        .json(&json!({"data": {"snapshotId": item["snapshotId"], "resume": resume}}))
        .send()
        .await?;
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    if status == 200
        && let Some(id) = item["snapshotId"].as_str()
    {
        tally.children.insert(id.to_owned(), json!(final_text(&body["result"])));
    }
    match (status, is_respond) {
        (200, true) => tally.respond += 1,
        (200, false) => tally.restart += 1,
        _ => tally
            .refused
            .push(json!({"agent": agent, "account": account, "status": status, "error": body["error"]})),
    }
    Ok(())
}

/// The resume that settles the paused call `part` of `tool`: the output it
/// gave when it `ran`, a refusal when it did not and is not `approved`,
/// else a restart with the approval.
fn resume_for(part: &Value, tool: &str, ran: bool, approved: bool) -> Value {
    if !ran && approved {
        let mut p = part.clone();
        p["metadata"] = json!({"resumed": {"approved": true}});
        return json!({"restart": [p]});
    }
    let output = match (tool == "transferMoney", ran) {
        (true, true) => json!({"success": true, "transactionId": "txn-123"}),
        (true, false) => json!({"success": false}),
        (false, true) => json!("Done: txn-123"),
        (false, false) => json!("The transfer was not made."),
    };
    json!({"respond": [{"toolResponse": {"name": tool, "ref": part["toolRequest"]["ref"], "output": output}}]})
}

/// The text of a run's final message (`result.message.content[].text`).
fn final_text(result: &Value) -> String {
    result["message"]["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}
