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

mod filter;
mod search;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use holdpoint::agent::{Agent, PendingApproval};
use holdpoint::session::SnapshotQuery;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Listing, SCAN_LIMIT, after_cursor, agents_of, encode_cursor, page_size};
use crate::auth::{Caller, Identity};
use crate::envelope::{ApiQuery, reply};
use crate::error::ApiError;
use crate::routes::pending::{access, roles};
use crate::signing::KeyRing;
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

/// The definitions of the agent's tools, by agent and tool name.
type Definitions = BTreeMap<(String, String), ToolInfo>;

/// Adds the definitions of `agent`'s tools.
fn define_tools(agent: &Agent, definitions: &mut Definitions) {
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
}

/// What the page says about every hold the caller may see, before the
/// filters: the counts and the values the filters may name.
#[derive(Default)]
struct Facets {
    counts: Counts,
    /// Tools in the order first seen (sorted by [`Facets::sorted`]).
    agents: BTreeMap<String, Vec<String>>,
    /// Roles in the order first seen (sorted by [`Facets::sorted`]).
    roles: Vec<String>,
    requesters: BTreeSet<String>,
    rules: BTreeSet<String>,
    numeric: BTreeSet<String>,
}

impl Facets {
    /// Counts `call` of `agent` and notes its tool, roles, requester,
    /// rule and numeric input fields.
    fn record(&mut self, agent: &str, call: &PendingApproval, for_me: bool, partial: bool, definitions: &Definitions) {
        self.counts.waiting += 1;
        self.counts.expired += usize::from(call.expired);
        self.counts.partial += usize::from(partial);
        self.counts.mine += usize::from(for_me);
        let tools = self.agents.entry(agent.to_owned()).or_default();
        if !tools.contains(&call.tool) {
            tools.push(call.tool.clone());
        }
        for role in call.rule.iter().flat_map(|r| &r.approvers) {
            if !self.roles.contains(role) {
                self.roles.push(role.clone());
            }
        }
        self.requesters.extend(call.owner.clone());
        self.rules.extend(call.rule.as_ref().map(|r| r.rule.clone()));
        if let Some(schema) = definitions
            .get(&(agent.to_owned(), call.tool.clone()))
            .and_then(|d| d.input_schema.as_ref())
        {
            self.numeric.extend(numeric_fields(schema).cloned());
        }
    }

    /// The facets with their tools and roles sorted.
    fn sorted(mut self) -> Self {
        for tools in self.agents.values_mut() {
            tools.sort();
        }
        self.roles.sort();
        self
    }
}

/// The items kept, sorted in `order`: the page after the cursor `after`
/// of at most `limit` items, and the cursor of the next page when there
/// is one.
fn page_of(
    items: Vec<InboxItem>,
    order: Order,
    after: Option<(i64, i64, String)>,
    limit: usize,
    keys: &KeyRing,
) -> (Vec<InboxItem>, Option<String>) {
    let mut keyed: Vec<((i64, i64, String), InboxItem)> = items.into_iter().map(|i| (key_of(&i), i)).collect();
    keyed.sort_by(|a, b| compare(order, &a.0, &b.0));
    let start = after.map_or(0, |after| {
        keyed.partition_point(|(k, _)| compare(order, k, &after) != Ordering::Greater)
    });
    let rest = keyed.len() - start;
    let page: Vec<((i64, i64, String), InboxItem)> = keyed.into_iter().skip(start).take(limit).collect();
    let next_cursor = (rest > page.len())
        .then(|| page.last().map(|(k, _)| encode_cursor(keys, Listing::Inbox, k)))
        .flatten();
    (page.into_iter().map(|(_, i)| i).collect(), next_cursor)
}

/// The definitions of the tools of the page's items, by agent and tool.
fn tools_of(page: &[InboxItem], definitions: &Definitions) -> BTreeMap<String, BTreeMap<String, ToolInfo>> {
    let mut tools: BTreeMap<String, BTreeMap<String, ToolInfo>> = BTreeMap::new();
    for item in page {
        let agent = item.call.agent.clone().unwrap_or_default();
        if let Some(info) = definitions.get(&(agent.clone(), item.call.tool.clone())) {
            tools
                .entry(agent)
                .or_default()
                .insert(item.call.tool.clone(), info.clone());
        }
    }
    tools
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
    let mut facets = Facets::default();
    let now = Utc::now();
    let mut items: Vec<InboxItem> = Vec::new();
    let mut definitions = Definitions::new();
    for agent in agents_of(&state, &caller, query.agent.as_deref())? {
        let listed = agent
            .decisions()
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
        define_tools(agent, &mut definitions);
        for mut call in listed {
            call.agent = Some(agent.name().to_owned());
            let answerable = may_answer(&call, &caller, &roles);
            let for_me = answerable.is_ok() && !already_approved(&call, &caller) && !call.expired;
            let partial = !call.approvals.is_empty();
            facets.record(agent.name(), &call, for_me, partial, &definitions);
            if !query.keeps(&call, for_me, partial, now) {
                continue;
            }
            let summary = call.summary();
            if search::found(agent, &call, &summary, needle.as_deref()).await {
                items.push(InboxItem {
                    call,
                    summary,
                    for_me,
                    refused: answerable.err(),
                });
            }
        }
    }
    let facets = facets.sorted();
    let total = items.len();
    let (items, next_cursor) = page_of(items, query.order, after, limit, state.keys());
    let tools = tools_of(&items, &definitions);
    Ok(reply(InboxPage {
        items,
        total,
        next_cursor,
        counts: facets.counts,
        truncated,
        agents: facets.agents,
        roles: facets.roles,
        requesters: facets.requesters.into_iter().collect(),
        rules: facets.rules.into_iter().collect(),
        numeric_fields: facets.numeric.into_iter().collect(),
        tools,
        caller: CallerInfo {
            principal: caller.principal().map(str::to_owned),
            roles,
        },
    })
    .into_response())
}
