//! `GET /inbox`: the holds the caller may answer or watch, filtered,
//! sorted in the asked [`Order`] and paged.
//!
//! Each item carries its `summary`, what is at stake in one line
//! ([`PendingApproval::summary`]: the tool's preview, else
//! [`hold_summary`](holdpoint::session::outbox::hold_summary), the words notifications use). The search `q` looks
//! at the ids, the tool, the owner, the interrupt and the input, the
//! summary, numbers as people type them (`25000`, `25,000`, `$25,000.00`)
//! and the user's request that led to the call (the last user text of the
//! held snapshot, read once per snapshot: snapshots never change).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use holdpoint::agent::{Access, Agent, PendingApproval};
use holdpoint::message::Role;
use holdpoint::session::SnapshotQuery;
use holdpoint::session::outbox::{ESCALATED_TO, group_thousands, is_amount_key};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Listing, SCAN_LIMIT, after_cursor, agents_of, encode_cursor, page_size};
use crate::auth::{Caller, Identity};
use crate::envelope::{ApiQuery, reply};
use crate::error::ApiError;
use crate::routes::pending::{access, roles};
use crate::state::AppState;

/// The order of the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Order {
    /// Longest waiting first.
    #[default]
    Oldest,
    /// Most recent first.
    Newest,
    /// Soonest to expire first (holds without an expiry last, oldest first).
    Expiry,
}

/// `GET /inbox` query parameters; every filter is optional and they combine.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct InboxQuery {
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    /// Only holds whose rule names this approver role.
    #[serde(default)]
    role: Option<String>,
    /// `true`: only expired holds; `false`: only live ones.
    #[serde(default)]
    expired: Option<bool>,
    /// Only holds the caller may answer and has not approved yet.
    #[serde(default)]
    mine: Option<bool>,
    /// Only holds with some approvals recorded short of the quorum.
    #[serde(default)]
    partial: Option<bool>,
    /// Text that must occur (case-insensitively) in the tool, agent, owner,
    /// session or snapshot id, the interrupt, or the input.
    #[serde(default)]
    q: Option<String>,
    /// Only holds of this requester (the session's owner).
    #[serde(default)]
    requester: Option<String>,
    /// Only holds under the approval rule of this name.
    #[serde(default)]
    rule: Option<String>,
    /// `true`: only holds an escalation widened; `false`: only the others.
    #[serde(default)]
    escalated: Option<bool>,
    /// The numeric input field `minAmount` / `maxAmount` bound; without
    /// it, the fields whose names say money (`amount`, `total`, …).
    #[serde(default)]
    amount_field: Option<String>,
    /// Only holds whose amount is at least this.
    #[serde(default)]
    min_amount: Option<f64>,
    /// Only holds whose amount is at most this.
    #[serde(default)]
    max_amount: Option<f64>,
    /// Only holds waiting at least this many seconds.
    #[serde(default)]
    min_age: Option<i64>,
    /// Only holds waiting at most this many seconds.
    #[serde(default)]
    max_age: Option<i64>,
    #[serde(default)]
    order: Order,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// A tool as the page describes it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolInfo {
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
}

/// Counts over everything the caller may see, before the filters.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Counts {
    waiting: usize,
    expired: usize,
    partial: usize,
    mine: usize,
}

/// One page of the queue.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct InboxPage {
    items: Vec<InboxItem>,
    /// How many holds pass the filters (all pages).
    total: usize,
    /// The cursor of the next page; absent on the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
    counts: Counts,
    /// Whether some agent had more waiting rows than one listing reads.
    truncated: bool,
    /// The agents and tools present (for the filters).
    agents: BTreeMap<String, Vec<String>>,
    /// The roles named by the rules of the holds present.
    roles: Vec<String>,
    /// The requesters (session owners) of the holds present.
    requesters: Vec<String>,
    /// The approval rules of the holds present, by name.
    rules: Vec<String>,
    /// The numeric fields of the input schemas of the tools present (what
    /// `amountField` may name).
    numeric_fields: Vec<String>,
    /// The definitions of the tools on this page, by agent and tool.
    tools: BTreeMap<String, BTreeMap<String, ToolInfo>>,
    /// Who is asking: the principal (absent when anonymous) and its roles.
    caller: CallerInfo,
}

/// The caller as the page shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct CallerInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    principal: Option<String>,
    roles: Vec<String>,
}

/// A listed hold, with what the caller may do about it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct InboxItem {
    #[serde(flatten)]
    call: PendingApproval,
    /// What is at stake, in one line (`"$18,300.00 → acct-4471"`).
    summary: String,
    /// Whether the caller may answer it and has not approved it yet.
    for_me: bool,
    /// Why the caller may not answer it, when it may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
}

/// Whether (and why not) `caller` may answer `call`.
fn may_answer(call: &PendingApproval, caller: &Identity, roles: &[String]) -> Result<(), String> {
    let principal = caller.principal();
    match &call.rule {
        Some(rule) => rule
            .may_answer(principal.unwrap_or(""), call.owner.as_deref(), roles)
            .map_err(|r| r.to_string()),
        None if call.owner.is_none() || call.owner.as_deref() == principal => Ok(()),
        None => Err("only the session's owner may answer this call".into()),
    }
}

fn already_approved(call: &PendingApproval, caller: &Identity) -> bool {
    caller
        .principal()
        .is_some_and(|p| call.approvals.iter().any(|a| a.actor == p))
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(needle)
}

fn matches_text(call: &PendingApproval, summary: &str, needle: &str) -> bool {
    let fields = [
        call.tool.as_str(),
        call.agent.as_deref().unwrap_or(""),
        call.owner.as_deref().unwrap_or(""),
        call.session_id.as_str(),
        call.snapshot_id.as_str(),
        summary,
    ];
    fields.iter().any(|f| contains(f, needle))
        || contains(&Value::Object(call.interrupt.clone()).to_string(), needle)
        || contains(&call.input.to_string(), needle)
        || numbers_in(&call.input)
            .iter()
            .any(|n| spellings(n).iter().any(|s| contains(s, needle)))
}

/// The numbers of an input (top level and nested).
fn numbers_in(input: &Value) -> Vec<f64> {
    match input {
        Value::Number(n) => n.as_f64().into_iter().collect(),
        Value::Array(items) => items.iter().flat_map(numbers_in).collect(),
        Value::Object(map) => map.values().flat_map(numbers_in).collect(),
        _ => Vec::new(),
    }
}

/// How people type a number: `25000`, `25,000`, `25,000.00`, `$25,000.00`.
fn spellings(n: &f64) -> [String; 4] {
    let grouped = group_thousands(*n, false);
    let cents = format!("{}{:.2}", if *n < 0.0 { "-" } else { "" }, n.abs());
    let grouped_cents = group_thousands(n.trunc(), false) + &cents[cents.len() - 3..];
    let dollars = format!("${grouped}");
    [cents, grouped, dollars, format!("${grouped_cents}")]
}

/// The amount of a hold `min`/`max` bound: the named numeric field, or the
/// largest of the fields whose names say money.
fn amount_of(call: &PendingApproval, field: Option<&str>) -> Option<f64> {
    let map = call.input.as_object()?;
    match field.filter(|f| !f.is_empty()) {
        Some(f) => map.get(f).and_then(Value::as_f64),
        None => map
            .iter()
            .filter(|(k, _)| is_amount_key(k))
            .filter_map(|(_, v)| v.as_f64())
            .reduce(f64::max),
    }
}

/// Whether an escalation widened the hold (interrupt `escalatedTo`).
fn escalated(call: &PendingApproval) -> bool {
    call.interrupt
        .get(ESCALATED_TO)
        .and_then(Value::as_array)
        .is_some_and(|to| !to.is_empty())
}

/// The numeric properties of an input schema.
fn numeric_fields(schema: &Value) -> impl Iterator<Item = &String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, p)| {
            let ty = p.get("type");
            let numeric = |t: &Value| matches!(t.as_str(), Some("number" | "integer"));
            ty.is_some_and(|t| numeric(t) || t.as_array().is_some_and(|a| a.iter().any(numeric)))
        })
        .map(|(k, _)| k)
}

/// The user's requests of held snapshots, by agent and snapshot id: a
/// snapshot never changes, so each is read once (bounded; cleared when full).
fn requests() -> &'static Mutex<HashMap<String, Arc<str>>> {
    static REQUESTS: OnceLock<Mutex<HashMap<String, Arc<str>>>> = OnceLock::new();
    REQUESTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// How many requests [`requests`] keeps.
const REQUESTS_KEPT: usize = 50_000;

/// The user's request that led to a held call: the last user text of its
/// snapshot ("" when there is none or it cannot be read).
async fn request_text(agent: &Agent, call: &PendingApproval) -> Arc<str> {
    let key = format!("{}\u{1f}{}", agent.name(), call.snapshot_id);
    if let Some(text) = requests().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return text;
    }
    // The caller may see the hold (it was listed for it): its snapshot is read whole.
    let Ok(snapshot) = agent.snapshot(&call.snapshot_id, Access::Full).await else {
        return Arc::from("");
    };
    let text: Arc<str> = snapshot
        .and_then(|s| s.state)
        .and_then(|state| {
            state
                .messages
                .iter()
                .rev()
                .filter(|m| m.role == Role::User)
                .map(|m| m.text().trim().to_owned())
                .find(|t| !t.is_empty())
        })
        .unwrap_or_default()
        .into();
    if let Ok(mut map) = requests().lock() {
        if map.len() >= REQUESTS_KEPT {
            map.clear();
        }
        map.insert(key, text.clone());
    }
    text
}

/// The sort key of a hold: its times and its ids, so that every hold has
/// one place in the order.
fn key_of(item: &InboxItem) -> (i64, i64, String) {
    let c = &item.call;
    let held = c.held_since.timestamp_nanos_opt().unwrap_or(0);
    let expires = c.expires_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(i64::MAX);
    let id = format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}",
        c.agent.as_deref().unwrap_or(""),
        c.snapshot_id,
        c.tool,
        c.reference.as_deref().unwrap_or("")
    );
    (expires, held, id)
}

fn compare(order: Order, a: &(i64, i64, String), b: &(i64, i64, String)) -> Ordering {
    match order {
        Order::Oldest => (a.1, &a.2).cmp(&(b.1, &b.2)),
        Order::Newest => (b.1, &b.2).cmp(&(a.1, &a.2)),
        Order::Expiry => a.cmp(b),
    }
}

/// `GET /inbox?agent=&tool=&role=&expired=&mine=&partial=&q=&requester=&rule=&escalated=&amountField=&minAmount=&maxAmount=&minAge=&maxAge=&order=&cursor=&limit=`:
/// the holds the caller may answer or watch, across its agents.
pub(crate) async fn inbox(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<InboxQuery>,
) -> Result<Response, ApiError> {
    let after = after_cursor(state.keys(), Listing::Inbox, query.cursor.as_deref())?;
    let limit = page_size(&state, query.limit);
    let roles = roles(&caller);
    let needle = query
        .q
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .map(str::to_lowercase);
    let mut truncated = false;
    let mut counts = Counts::default();
    let mut agents_seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut roles_seen: Vec<String> = Vec::new();
    let mut requesters: BTreeSet<String> = BTreeSet::new();
    let mut rules_seen: BTreeSet<String> = BTreeSet::new();
    let mut numeric: BTreeSet<String> = BTreeSet::new();
    let now = Utc::now();
    let mut items: Vec<InboxItem> = Vec::new();
    let mut definitions: BTreeMap<(String, String), ToolInfo> = BTreeMap::new();
    for agent in agents_of(&state, &caller, query.agent.as_deref())? {
        let listed = agent
            .pending_for(
                SnapshotQuery {
                    owner: caller.principal().map(str::to_owned),
                    limit: Some(SCAN_LIMIT),
                    ..SnapshotQuery::default()
                },
                access(&caller, &roles),
            )
            .await?;
        truncated |= listed.len() >= SCAN_LIMIT;
        for def in agent.tool_definitions() {
            definitions.insert(
                (agent.name().to_owned(), def.name.clone()),
                ToolInfo {
                    description: def.description.clone(),
                    input_schema: def.input_schema.clone(),
                    output_schema: def.output_schema.clone(),
                },
            );
        }
        for mut call in listed {
            call.agent = Some(agent.name().to_owned());
            let answerable = may_answer(&call, &caller, &roles);
            let for_me = answerable.is_ok() && !already_approved(&call, &caller) && !call.expired;
            let partial = !call.approvals.is_empty();
            counts.waiting += 1;
            counts.expired += usize::from(call.expired);
            counts.partial += usize::from(partial);
            counts.mine += usize::from(for_me);
            let tools = agents_seen.entry(agent.name().to_owned()).or_default();
            if !tools.contains(&call.tool) {
                tools.push(call.tool.clone());
            }
            for role in call.rule.iter().flat_map(|r| &r.approvers) {
                if !roles_seen.contains(role) {
                    roles_seen.push(role.clone());
                }
            }
            requesters.extend(call.owner.clone());
            rules_seen.extend(call.rule.as_ref().map(|r| r.rule.clone()));
            if let Some(schema) = definitions
                .get(&(agent.name().to_owned(), call.tool.clone()))
                .and_then(|d| d.input_schema.as_ref())
            {
                numeric.extend(numeric_fields(schema).cloned());
            }
            let waited = (now - call.held_since).num_seconds();
            let amount = amount_of(&call, query.amount_field.as_deref());
            let in_range =
                |bound: Option<f64>, ok: fn(f64, f64) -> bool| bound.is_none_or(|b| amount.is_some_and(|a| ok(a, b)));
            let keep = query.tool.as_deref().is_none_or(|t| t.is_empty() || t == call.tool)
                && query.role.as_deref().is_none_or(|r| {
                    r.is_empty()
                        || call
                            .rule
                            .as_ref()
                            .is_some_and(|rule| rule.approvers.iter().any(|a| a == r))
                })
                && query.expired.is_none_or(|e| e == call.expired)
                && query.mine.is_none_or(|m| m == for_me)
                && query.partial.is_none_or(|p| p == partial)
                && query
                    .requester
                    .as_deref()
                    .is_none_or(|r| r.is_empty() || call.owner.as_deref() == Some(r))
                && query
                    .rule
                    .as_deref()
                    .is_none_or(|r| r.is_empty() || call.rule.as_ref().is_some_and(|rule| rule.rule == r))
                && query.escalated.is_none_or(|e| e == escalated(&call))
                && in_range(query.min_amount, |a, b| a >= b)
                && in_range(query.max_amount, |a, b| a <= b)
                && query.min_age.is_none_or(|m| waited >= m)
                && query.max_age.is_none_or(|m| waited <= m);
            if !keep {
                continue;
            }
            let summary = call.summary();
            let found = match needle.as_deref() {
                None => true,
                Some(n) => matches_text(&call, &summary, n) || contains(&request_text(agent, &call).await, n),
            };
            if found {
                items.push(InboxItem {
                    call,
                    summary,
                    for_me,
                    refused: answerable.err(),
                });
            }
        }
    }
    for tools in agents_seen.values_mut() {
        tools.sort();
    }
    roles_seen.sort();
    let total = items.len();
    let mut keyed: Vec<((i64, i64, String), InboxItem)> = items.into_iter().map(|i| (key_of(&i), i)).collect();
    keyed.sort_by(|a, b| compare(query.order, &a.0, &b.0));
    let start = after.map_or(0, |after| {
        keyed.partition_point(|(k, _)| compare(query.order, k, &after) != Ordering::Greater)
    });
    let rest = keyed.len() - start;
    let page: Vec<((i64, i64, String), InboxItem)> = keyed.into_iter().skip(start).take(limit).collect();
    let next_cursor = (rest > page.len())
        .then(|| page.last().map(|(k, _)| encode_cursor(state.keys(), Listing::Inbox, k)))
        .flatten();
    let mut tools: BTreeMap<String, BTreeMap<String, ToolInfo>> = BTreeMap::new();
    for (_, item) in &page {
        let agent = item.call.agent.clone().unwrap_or_default();
        if let Some(info) = definitions.get(&(agent.clone(), item.call.tool.clone())) {
            tools
                .entry(agent)
                .or_default()
                .insert(item.call.tool.clone(), info.clone());
        }
    }
    Ok(reply(InboxPage {
        items: page.into_iter().map(|(_, i)| i).collect(),
        total,
        next_cursor,
        counts,
        truncated,
        agents: agents_seen,
        roles: roles_seen,
        requesters: requesters.into_iter().collect(),
        rules: rules_seen.into_iter().collect(),
        numeric_fields: numeric.into_iter().collect(),
        tools,
        caller: CallerInfo {
            principal: caller.principal().map(str::to_owned),
            roles,
        },
    })
    .into_response())
}
