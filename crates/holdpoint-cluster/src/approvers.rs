//! The approvers: four answer over the inbox API (`GET /inbox`, `POST
//! /agents/{name}/answer`), one through the `holdpoint` CLI. Each prefers
//! the holds assigned to it (a quorum-2 hold to two of them) and helps
//! with the others when it has none.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use crate::plan::{self, APPROVERS, CLI_APPROVER};
use crate::shared::Shared;

/// Answers approver `k`'s inbox until [`Shared::stop_approvers`] is set.
pub async fn approver(shared: Arc<Shared>, k: usize) {
    let key = plan::approver_key(k);
    // Holds this approver answered (or was refused on): not tried again.
    let mut done: HashSet<String> = HashSet::new();
    while !shared.stop_approvers.load(Ordering::SeqCst) {
        let Some(items) = inbox(&shared, &key).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let batch = pick(&items, &done, k);
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        for item in batch {
            let Some(account) = item["input"]["toAccount"].as_str() else {
                continue;
            };
            shared.saw(account);
            let approve = plan::approves(account);
            let outcome = if k == CLI_APPROVER {
                answer_cli(&shared, &key, item, approve).await
            } else {
                answer_http(&shared, &key, item, approve).await
            };
            shared.stats.answer(&outcome);
            if outcome != "error" {
                done.insert(item_key(item));
            }
        }
    }
}

/// The first page of `key`'s inbox, or `None` when it could not be read.
async fn inbox(shared: &Shared, key: &str) -> Option<Vec<Value>> {
    let r = shared
        .http
        .get(format!("{}/inbox?limit=200&mine=true", shared.proxy))
        .header("x-api-key", key)
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    let body: Value = r.json().await.ok()?;
    Some(body["result"]["items"].as_array().cloned().unwrap_or_default())
}

/// What approver `k` answers next: up to 20 of the holds assigned to it,
/// else up to 5 of any not yet done.
fn pick<'a>(items: &'a [Value], done: &HashSet<String>, k: usize) -> Vec<&'a Value> {
    let open: Vec<&Value> = items.iter().filter(|it| !done.contains(&item_key(it))).collect();
    let mine: Vec<&Value> = open
        .iter()
        .copied()
        .filter(|it| {
            let n = it["input"]["toAccount"]
                .as_str()
                .and_then(plan::hold_number)
                .unwrap_or(0);
            let quorum = it["rule"]["quorum"].as_u64().unwrap_or(1);
            n % APPROVERS == k || (quorum > 1 && (n + 1) % APPROVERS == k)
        })
        .collect();
    if mine.is_empty() {
        open.into_iter().take(5).collect()
    } else {
        mine.into_iter().take(20).collect()
    }
}

fn item_key(item: &Value) -> String {
    format!(
        "{}/{}",
        item["snapshotId"].as_str().unwrap_or(""),
        item["ref"].as_str().unwrap_or("")
    )
}

/// Answers `item` over `POST /agents/{name}/answer`: `decided`, `counted`
/// (toward a quorum), `httpNNN` (refused) or `error` (retry).
async fn answer_http(shared: &Shared, key: &str, item: &Value, approve: bool) -> String {
    let agent = item["agent"].as_str().unwrap_or("bankingAgent");
    let mut data = json!({
        "snapshotId": item["snapshotId"],
        "ref": item["ref"],
        "decision": if approve { "approve" } else { "deny" },
    });
    if !approve {
        data["reason"] = json!("cluster run: declined");
    }
    let sent = shared
        .http
        .post(format!("{}/agents/{agent}/answer", shared.proxy))
        .header("x-api-key", key)
        .json(&json!({ "data": data }))
        .send()
        .await;
    match sent {
        Ok(r) => {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            match status {
                200 if body["result"]["decided"] == json!(true) => "decided".into(),
                200 => "counted".into(),
                500..=599 => "error".into(),
                other => format!("http{other}"),
            }
        }
        Err(_) => "error".into(),
    }
}

/// Answers `item` with `holdpoint approve|deny`: `decided`, `counted`,
/// `cliRefused` (already answered, gone) or `error` (retry).
async fn answer_cli(shared: &Shared, key: &str, item: &Value, approve: bool) -> String {
    let agent = item["agent"].as_str().unwrap_or("bankingAgent").to_owned();
    let mut cmd = tokio::process::Command::new(&shared.holdpoint);
    cmd.args(["--server", &shared.proxy, "--api-key", key, "--agent", &agent])
        .arg(if approve { "approve" } else { "deny" })
        .arg(item["snapshotId"].as_str().unwrap_or(""))
        .arg(item["ref"].as_str().unwrap_or(""))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if !approve {
        cmd.args(["--reason", "cluster run: declined"]);
    }
    shared.stats.cli_answers.fetch_add(1, Ordering::SeqCst);
    match cmd.output().await {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("the resumed turn ended") {
                "decided".into()
            } else {
                "counted".into()
            }
        }
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
            let refused = ["not waiting", "already", "not found", "taken", "409", "404"];
            if refused.iter().any(|w| err.contains(w)) {
                "cliRefused".into()
            } else {
                "error".into()
            }
        }
        Err(_) => "error".into(),
    }
}
