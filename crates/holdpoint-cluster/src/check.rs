//! The ledger check: every approved transfer ran exactly once and none
//! denied ran (the transfer tool's own table against the holds known to
//! exist), no session is stuck without an answerable hold, and every
//! webhook event reached the receiver under one stable id. A lost transfer
//! is explained from the store: its session's snapshots and audit rows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sqlx::Row;

use crate::Error;
use crate::infra::Hooks;
use crate::plan;
use crate::shared::Shared;

/// Checks the ledger, the sessions and the webhooks; `clean` when all hold.
pub async fn check(shared: &Shared, db: &sqlx::PgPool, hooks: &Arc<Mutex<Hooks>>) -> Result<Value, Error> {
    let mut out = ledger(shared, db).await?;
    let sessions = sessions(shared, db).await?;
    let webhooks = webhooks(db, hooks).await?;
    let clean = out["clean"] == json!(true) && sessions["clean"] == json!(true) && webhooks["clean"] == json!(true);
    let mut lost = Vec::new();
    for account in out["lostAccounts"].as_array().cloned().unwrap_or_default() {
        if let Some(a) = account.as_str() {
            lost.push(explain(db, a).await?);
        }
    }
    if let (Some(o), Some(s)) = (out.as_object_mut(), sessions.as_object()) {
        o.extend(
            s.iter()
                .filter(|(k, _)| *k != "clean")
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        o.insert("clean".into(), json!(clean));
        o.insert("webhooks".into(), webhooks);
        o.insert("lostExplained".into(), json!(lost));
    }
    Ok(out)
}

/// Executions by account against the holds known to exist.
async fn ledger(shared: &Shared, db: &sqlx::PgPool) -> Result<Value, Error> {
    let rows = sqlx::query("SELECT to_account, count(*) AS n FROM banking_ledger GROUP BY to_account")
        .fetch_all(db)
        .await
        .unwrap_or_default();
    let mut runs: HashMap<String, i64> = HashMap::new();
    for row in rows {
        runs.insert(row.try_get("to_account")?, row.try_get("n")?);
    }
    let confirmed = shared.confirmed.lock().map(|s| s.clone()).unwrap_or_default();
    let seen = shared.seen.lock().map(|s| s.clone()).unwrap_or_default();
    let holds: HashSet<&String> = confirmed.iter().chain(seen.iter()).collect();
    let approved: Vec<&String> = holds.iter().copied().filter(|a| plan::approves(a)).collect();
    let executed_once = approved.iter().filter(|a| runs.get(**a) == Some(&1)).count();
    // Not run and still waiting for its answer (a run cut short before the
    // inbox drained): not lost, as long as the inbox lists it (`sessions`).
    let waiting = waiting_accounts(db).await?;
    let unanswered = approved
        .iter()
        .filter(|a| !runs.contains_key(**a) && waiting.contains(**a))
        .count();
    let mut lost: Vec<&String> = approved
        .iter()
        .copied()
        .filter(|a| !runs.contains_key(*a) && !waiting.contains(*a))
        .collect();
    lost.sort();
    let duplicates: Vec<(&String, &i64)> = runs.iter().filter(|(_, n)| **n > 1).collect();
    let ran_denied = holds
        .iter()
        .filter(|a| !plan::approves(a) && runs.contains_key(**a))
        .count();
    let clean = lost.is_empty() && duplicates.is_empty() && ran_denied == 0;
    Ok(json!({
        "clean": clean,
        "holds": holds.len(),
        "approved": approved.len(),
        "denied": holds.len() - approved.len(),
        "executions": runs.values().sum::<i64>(),
        "executedOnce": executed_once,
        "approvedStillWaiting": unanswered,
        "duplicates": duplicates.len(),
        "duplicateAccounts": duplicates.iter().take(20).map(|(a, n)| json!({"account": a, "runs": n})).collect::<Vec<_>>(),
        "lost": lost.len(),
        "lostAccounts": lost.iter().take(20).map(|a| json!(a)).collect::<Vec<_>>(),
        "ranAfterDenial": ran_denied,
        "runsOfUnknownHolds": runs.keys().filter(|a| !holds.contains(a)).count(),
    }))
}

/// The accounts of the sessions whose latest snapshot waits for an
/// answer (paused, not claimed).
async fn waiting_accounts(db: &sqlx::PgPool) -> Result<HashSet<String>, Error> {
    let rows: Vec<Option<String>> = sqlx::query_scalar(
        r#"SELECT coalesce(substring(data::text from '"toAccount":"(c[0-9r]+)"'),
                          substring(data::text from ' to (c[0-9r]+)"'))
           FROM (SELECT DISTINCT ON (session_id) data, status, finish_reason, resumed_at_ns
                 FROM holdpoint_snapshots ORDER BY session_id, created_at_ns DESC, snapshot_id DESC) latest
           WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL"#,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().flatten().collect())
}

/// The latest snapshot of each session: finished, or waiting on a hold the
/// inbox lists; anything else is stuck.
async fn sessions(shared: &Shared, db: &sqlx::PgPool) -> Result<Value, Error> {
    let latest = sqlx::query(
        "SELECT DISTINCT ON (session_id) session_id, coalesce(agent, '') AS agent, status,
                coalesce(finish_reason, '') AS finish_reason, resumed_at_ns IS NULL AS unanswered
         FROM holdpoint_snapshots ORDER BY session_id, created_at_ns DESC, snapshot_id DESC",
    )
    .fetch_all(db)
    .await?;
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let (mut stuck, mut waiting) = (0usize, 0usize);
    for row in &latest {
        let agent: String = row.try_get("agent")?;
        let status: String = row.try_get("status")?;
        let finish: String = row.try_get("finish_reason")?;
        let unanswered: bool = row.try_get("unanswered")?;
        *states.entry(format!("{agent}:{status}:{finish}")).or_default() += 1;
        match (status.as_str(), finish.as_str()) {
            ("completed", "stop") => {}
            ("completed", "interrupted") if unanswered => waiting += 1,
            _ => stuck += 1,
        }
    }
    // A waiting session is fine only while its hold is answerable: the inbox lists it.
    let inbox: Value = shared
        .http
        .get(format!("{}/inbox?limit=1", shared.proxy))
        .header("x-api-key", plan::approver_key(0))
        .send()
        .await?
        .json()
        .await?;
    let answerable = inbox["result"]["total"].as_u64().unwrap_or(0) as usize;
    // Foreground children's holds surface at their root: a child waiting
    // under an answered root is not listed, so count roots only.
    let waiting_unanswerable = waiting.saturating_sub(answerable);
    Ok(json!({
        "clean": stuck == 0 && waiting_unanswerable == 0,
        "sessions": latest.len(),
        "sessionStates": states,
        "stuckSessions": stuck,
        "waitingUnanswerable": waiting_unanswerable,
    }))
}

/// Every delivered outbox row reached the receiver under its id, no id
/// changed its payload, none is left undelivered.
async fn webhooks(db: &sqlx::PgPool, hooks: &Arc<Mutex<Hooks>>) -> Result<Value, Error> {
    let outbox = sqlx::query("SELECT event_id, state FROM holdpoint_outbox")
        .fetch_all(db)
        .await?;
    let hooks = hooks
        .lock()
        .map_err(|_| Error::Setup("the webhook receiver panicked".into()))?;
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    let mut delivered_missing = 0;
    for row in &outbox {
        let id: String = row.try_get("event_id")?;
        let state: String = row.try_get("state")?;
        if state == "delivered" && hooks.seen.get(&id).is_none_or(|h| h.accepted == 0) {
            delivered_missing += 1;
        }
        *states.entry(state).or_default() += 1;
    }
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for rec in hooks.seen.values() {
        *kinds.entry(rec.kind.clone()).or_default() += 1;
    }
    let changed = hooks.seen.values().filter(|h| h.changed).count();
    let never_accepted = hooks.seen.values().filter(|h| h.accepted == 0).count();
    let undelivered = states.get("pending").copied().unwrap_or(0) + states.get("dead").copied().unwrap_or(0);
    Ok(json!({
        "clean": delivered_missing == 0 && changed == 0 && never_accepted == 0 && undelivered == 0,
        "outboxRows": outbox.len(),
        "outboxStates": states,
        "idsReceived": hooks.seen.len(),
        "byType": kinds,
        "redeliveredIds": hooks.seen.values().filter(|h| h.requests > 1).count(),
        "idsWithChangedPayload": changed,
        "idsNeverAccepted": never_accepted,
        "deliveredButNotReceived": delivered_missing,
        "withoutId": hooks.without_id,
    }))
}

/// What the store says of the session that held `account`'s transfer: its
/// snapshots (times in ns, status, the last model text) and audit rows.
async fn explain(db: &sqlx::PgPool, account: &str) -> Result<Value, Error> {
    let direct = format!("\"toAccount\":\"{account}\"");
    let nested = format!(" to {account}\"");
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT session_id FROM holdpoint_snapshots
         WHERE strpos(data::text, $1) > 0 OR strpos(data::text, $2) > 0",
    )
    .bind(&direct)
    .bind(&nested)
    .fetch_all(db)
    .await?;
    let mut sessions = Vec::new();
    for id in ids {
        let snaps = sqlx::query(
            "SELECT snapshot_id, created_at_ns, resumed_at_ns, status, coalesce(finish_reason, '') AS finish,
                    coalesce(agent, '') AS agent, data::text AS data
             FROM holdpoint_snapshots WHERE session_id = $1 ORDER BY created_at_ns, snapshot_id",
        )
        .bind(&id)
        .fetch_all(db)
        .await?;
        let mut rows = Vec::new();
        for s in &snaps {
            let data: Value = serde_json::from_str(&s.try_get::<String, _>("data")?).unwrap_or(Value::Null);
            rows.push(json!({
                "snapshotId": s.try_get::<String, _>("snapshot_id")?,
                "agent": s.try_get::<String, _>("agent")?,
                "createdNs": s.try_get::<i64, _>("created_at_ns")?,
                "resumedNs": s.try_get::<Option<i64>, _>("resumed_at_ns")?,
                "status": s.try_get::<String, _>("status")?,
                "finish": s.try_get::<String, _>("finish")?,
                "lastText": last_model_text(&data),
            }));
        }
        let audit: Vec<Value> = sqlx::query_scalar::<_, String>(
            "SELECT data::text FROM holdpoint_audit WHERE session_id = $1 ORDER BY seq",
        )
        .bind(&id)
        .fetch_all(db)
        .await?
        .iter()
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .map(|a| json!({"at": a["at"], "decision": a["decision"], "actor": a["actor"], "principal": a["principal"], "snapshotId": a["snapshotId"], "settles": a["settles"]}))
        .collect();
        sessions.push(json!({"sessionId": id, "snapshots": rows, "audit": audit}));
    }
    Ok(json!({"account": account, "sessions": sessions}))
}

/// The text of the last model message of a snapshot's conversation.
fn last_model_text(snapshot: &Value) -> String {
    let messages = snapshot["state"]["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == json!("model"))
        .and_then(|m| m["content"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}
