//! `GET /audit`: the decisions the caller made or that were made on its
//! behalf, and those about holds it may see (a rule's approvers read their
//! team's decisions), newest first, filtered and paged; the `operator`
//! role reads all.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, hash_json};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Listing, SCAN_LIMIT, after_cursor, agents_of, encode_cursor, page_size};
use crate::auth::{Caller, Identity};
use crate::envelope::{ApiQuery, reply};
use crate::error::ApiError;
use crate::routes::OPERATOR_ROLE;
use crate::routes::pending::{access, roles};
use crate::state::AppState;

/// `GET /audit` query parameters; every filter is optional and they combine.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AuditFilter {
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    /// Who acted (the record's actor, else its principal).
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    /// Only the decisions about this held snapshot; readable by whoever may
    /// see the hold (an approver too, after it was answered), 404 otherwise.
    #[serde(default)]
    snapshot_id: Option<String>,
    /// Only records at or after this time (RFC 3339).
    #[serde(default)]
    since: Option<DateTime<Utc>>,
    /// Only records before this time (RFC 3339).
    #[serde(default)]
    until: Option<DateTime<Utc>>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// One page of the audit trail, newest first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditPage {
    items: Vec<AuditItem>,
    total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
    truncated: bool,
}

/// A record as the listing gives it: with `heldInput`, the input the
/// decision was about (read from its held snapshot, and only when it
/// hashes to the record's `inputHash`), so a reader sees what was
/// approved, not a hash. Absent when the record carries its `input` (an
/// edit) or the snapshot is gone.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditItem {
    #[serde(flatten)]
    record: AuditRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    held_input: Option<Value>,
}

/// The input of the paused `tool` call (with `reference`) in the held
/// snapshot `snapshot`, when it hashes to `hash`.
fn held_input(snapshot: &Snapshot, tool: &str, reference: Option<&str>, hash: &str) -> Option<Value> {
    let state = snapshot.state.as_ref()?;
    state
        .messages
        .iter()
        .rev()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| p.as_tool_request().map(|r| (r, p)))
        .filter(|(r, _)| r.name == tool && r.reference.as_deref() == reference)
        .map(|(r, part)| (r.input.clone().unwrap_or(Value::Null), part))
        .find(|(input, _)| hash_json(input) == hash)
        .map(|(mut input, part)| {
            // Shown masked (docs/reference.md §22.1); the hash was of the real input.
            holdpoint::review::Redaction::on(part).mask(&mut input);
            input
        })
}

/// Whether `record` is the decision `wanted` names: its wire name, an older
/// spelling of it (`expired`, `abandoned`), or `settle` for any decision of
/// a settlement.
fn is_decision(record: &AuditRecord, wanted: &str) -> bool {
    let name = record.decision.as_str();
    name == wanted
        || (wanted == "settle" && record.settles)
        || matches!((name, wanted), ("expire", "expired") | ("abandon", "abandoned"))
}

/// Whether `caller` may read `record` by who it is: a decision on its
/// behalf or by it (an anonymous caller: the unowned ones). Records of
/// holds the caller may see are readable too (see [`audit`]).
fn readable(record: &AuditRecord, caller: &Identity) -> bool {
    match caller.principal() {
        Some(p) => record.principal.as_deref() == Some(p) || record.actor.as_deref() == Some(p),
        None => record.principal.is_none(),
    }
}

/// A record's place in the listing: (0, minus its time, agent and id).
type Key = (i64, i64, String);

/// `o`, unless it is empty (an empty filter is no filter).
fn nonempty(o: &Option<String>) -> Option<String> {
    o.clone().filter(|s| !s.is_empty())
}

/// Whether `r` passes the filters of `query` (hold, tool, actor, decision,
/// time); who may read it is decided apart.
fn wanted(query: &AuditFilter, r: &AuditRecord) -> bool {
    let who = r.actor.as_deref().or(r.principal.as_deref());
    nonempty(&query.snapshot_id).is_none_or(|id| id == r.snapshot_id)
        && nonempty(&query.tool).is_none_or(|t| t == r.tool)
        && nonempty(&query.actor).is_none_or(|a| who == Some(a.as_str()))
        && nonempty(&query.decision).is_none_or(|d| is_decision(r, &d))
        && query.since.is_none_or(|t| r.at >= t)
        && query.until.is_none_or(|t| r.at < t)
}

/// `GET /audit?agent=&tool=&actor=&decision=&sessionId=&snapshotId=&since=&until=&cursor=&limit=`:
/// the decisions the caller made or that were made on its behalf, newest
/// first; with `snapshotId`, the decisions about that hold for anyone who
/// may see it (404 for anyone else).
pub(crate) async fn audit(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<AuditFilter>,
) -> Result<Response, ApiError> {
    let after = after_cursor(state.keys(), Listing::Audit, query.cursor.as_deref())?;
    let limit = page_size(&state, query.limit);
    let mut truncated = false;
    let mut rows: Vec<(Key, AuditRecord)> = Vec::new();
    let snapshot_id = nonempty(&query.snapshot_id);
    let caller_roles = roles(&caller);
    // The `operator` role reads the whole trail (docs/reference.md §10.10).
    let operator = caller.roles.contains(OPERATOR_ROLE);
    let mut seen_hold = false;
    for agent in agents_of(&state, &caller, query.agent.as_deref())? {
        // The hold's own decisions are readable by whoever may see the hold.
        let hold_visible = match &snapshot_id {
            Some(id) => agent.snapshot(id, access(&caller, &caller_roles)).await?.is_some(),
            None => false,
        };
        if snapshot_id.is_some() && !hold_visible {
            continue;
        }
        seen_hold |= hold_visible;
        let records = agent
            .decisions()
            .audit(AuditQuery {
                session_id: nonempty(&query.session_id),
                limit: Some(SCAN_LIMIT),
                ..AuditQuery::default()
            })
            .await?;
        truncated |= records.len() >= SCAN_LIMIT;
        // A record belongs to the hold it decided: whoever may see that
        // hold (its rule's approvers, a team) reads it, each hold read once.
        let mut holds_seen: HashMap<String, bool> = HashMap::new();
        for r in records {
            if !wanted(&query, &r) {
                continue;
            }
            let mut keep = operator || hold_visible || readable(&r, &caller);
            if !keep && !caller_roles.is_empty() && !r.snapshot_id.is_empty() {
                keep = match holds_seen.get(&r.snapshot_id) {
                    Some(seen) => *seen,
                    None => {
                        let seen = agent
                            .snapshot(&r.snapshot_id, access(&caller, &caller_roles))
                            .await?
                            .is_some();
                        holds_seen.insert(r.snapshot_id.clone(), seen);
                        seen
                    }
                };
            }
            if keep {
                // Newest first: the key sorts descending by negating time.
                let at = r.at.timestamp_nanos_opt().unwrap_or(0);
                rows.push(((0, -at, format!("{}\u{1f}{}", agent.name(), r.id)), r));
            }
        }
    }
    if let Some(id) = &snapshot_id
        && rows.is_empty()
        && !seen_hold
    {
        return Err(ApiError::not_found(format!("snapshot {id} not found")));
    }
    let total = rows.len();
    let (page, next_cursor) = one_page(&state, rows, after, limit);
    let items = with_held_inputs(&state, &caller, page.into_iter()).await;
    Ok(reply(AuditPage {
        items,
        total,
        next_cursor,
        truncated,
    })
    .into_response())
}

/// The page's records with the inputs they decided, read once per held
/// snapshot (the record is readable, so its hold's input is shown with it).
async fn with_held_inputs(
    state: &AppState,
    caller: &Identity,
    page: impl Iterator<Item = AuditRecord>,
) -> Vec<AuditItem> {
    let mut snapshots: HashMap<(String, String), Option<Snapshot>> = HashMap::new();
    let mut items = Vec::new();
    for record in page {
        let mut held = None;
        if record.input.is_none()
            && !record.snapshot_id.is_empty()
            && let Some(agent_name) = record.agent.clone()
            && let Ok(agent) = state.agent(caller, &agent_name)
        {
            let key = (agent_name, record.snapshot_id.clone());
            if !snapshots.contains_key(&key) {
                let read = agent
                    .snapshot(&record.snapshot_id, holdpoint::agent::Access::Full)
                    .await
                    .ok()
                    .flatten();
                snapshots.insert(key.clone(), read);
            }
            held = snapshots
                .get(&key)
                .and_then(Option::as_ref)
                .and_then(|snap| held_input(snap, &record.tool, record.reference.as_deref(), &record.input_hash));
        }
        items.push(AuditItem {
            record,
            held_input: held,
        });
    }
    items
}

/// The page of `rows` after the cursor's key, in key order (newest first),
/// and the cursor of the next page when more follow.
fn one_page(
    state: &AppState,
    mut rows: Vec<(Key, AuditRecord)>,
    after: Option<Key>,
    limit: usize,
) -> (Vec<AuditRecord>, Option<String>) {
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let start = after.map_or(0, |after| rows.partition_point(|(k, _)| *k <= after));
    let rest = rows.len() - start;
    let page: Vec<_> = rows.into_iter().skip(start).take(limit).collect();
    let next_cursor = (rest > page.len())
        .then(|| page.last().map(|(k, _)| encode_cursor(state.keys(), Listing::Audit, k)))
        .flatten();
    (page.into_iter().map(|(_, r)| r).collect(), next_cursor)
}
