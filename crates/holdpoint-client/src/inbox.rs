//! The approver's queue and the audit trail over HTTP (`GET /inbox`,
//! `GET /audit`; docs/reference.md §12.8): their queries and pages.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use holdpoint::agent::PendingApproval;
use holdpoint::session::AuditRecord;
use serde::Deserialize;
use serde_json::Value;

use crate::client::Client;
use crate::error::Result;

/// The order of the inbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboxOrder {
    /// Longest waiting first (the server's default).
    #[default]
    Oldest,
    /// Most recent first.
    Newest,
    /// Soonest to expire first (holds without an expiry last).
    Expiry,
}

impl InboxOrder {
    fn as_str(self) -> &'static str {
        match self {
            InboxOrder::Oldest => "oldest",
            InboxOrder::Newest => "newest",
            InboxOrder::Expiry => "expiry",
        }
    }
}

/// The approver's queue (`GET /inbox`): every filter is optional and they
/// combine; pages follow [`InboxPage::next_cursor`] with [`after`](Self::after).
///
/// ```
/// use holdpoint_client::{InboxOrder, InboxQuery};
/// let query = InboxQuery::new().mine(true).tool("transferMoney").order(InboxOrder::Expiry).limit(20);
/// assert_eq!(query.mine, Some(true));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InboxQuery {
    /// Only this agent's (404 unknown, 403 out of the caller's scope).
    pub agent: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only holds whose rule names this approver role.
    pub role: Option<String>,
    /// `true`: only expired holds; `false`: only live ones.
    pub expired: Option<bool>,
    /// `true`: only holds the caller may answer, has not approved and that
    /// have not expired; `false`: only the others.
    pub mine: Option<bool>,
    /// `true`: only holds with approvals recorded short of the quorum.
    pub partial: Option<bool>,
    /// Text that must occur (case-insensitively) in the tool, agent,
    /// owner, session or snapshot id, the interrupt or the input.
    pub text: Option<String>,
    /// The order.
    pub order: InboxOrder,
    /// The page after this cursor (a previous page's `next_cursor`).
    pub cursor: Option<String>,
    /// At most this many per page (the server's default 50).
    pub limit: Option<usize>,
}

impl InboxQuery {
    /// Every hold the caller may answer or watch, oldest first.
    pub fn new() -> Self {
        InboxQuery::default()
    }

    /// Only agent `name`'s.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent = Some(name.into());
        self
    }

    /// Only tool `name`'s.
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// Only holds whose rule names `role`.
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }

    /// Only expired (`true`) or live (`false`) holds.
    pub fn expired(mut self, expired: bool) -> Self {
        self.expired = Some(expired);
        self
    }

    /// Only holds for the caller to answer (`true`) or the others.
    pub fn mine(mut self, mine: bool) -> Self {
        self.mine = Some(mine);
        self
    }

    /// Only partly approved holds (`true`) or the others.
    pub fn partial(mut self, partial: bool) -> Self {
        self.partial = Some(partial);
        self
    }

    /// Only holds mentioning `text` (the server's `q`).
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// In `order`.
    pub fn order(mut self, order: InboxOrder) -> Self {
        self.order = order;
        self
    }

    /// The page after `cursor`.
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// At most `limit` per page.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let text = |o: &Option<String>| o.clone().unwrap_or_default();
        let flag = |o: Option<bool>| o.map(|b| b.to_string()).unwrap_or_default();
        vec![
            ("agent", text(&self.agent)),
            ("tool", text(&self.tool)),
            ("role", text(&self.role)),
            ("expired", flag(self.expired)),
            ("mine", flag(self.mine)),
            ("partial", flag(self.partial)),
            ("q", text(&self.text)),
            ("order", self.order.as_str().to_owned()),
            ("cursor", text(&self.cursor)),
            ("limit", self.limit.map(|n| n.to_string()).unwrap_or_default()),
        ]
    }
}

/// One page of the approver's queue (`GET /inbox`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InboxPage {
    /// The holds of this page.
    pub items: Vec<InboxItem>,
    /// How many holds pass the filters, on all pages.
    pub total: usize,
    /// The cursor of the next page; `None` on the last one.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// Counts over everything the caller may see, before the filters.
    pub counts: InboxCounts,
    /// Whether some agent had more waiting rows than one listing reads.
    #[serde(default)]
    pub truncated: bool,
    /// The agents and tools present, by agent.
    #[serde(default)]
    pub agents: BTreeMap<String, Vec<String>>,
    /// The approver roles the rules of the holds present name.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The definitions of this page's tools, by agent and tool.
    #[serde(default)]
    pub tools: BTreeMap<String, BTreeMap<String, InboxTool>>,
    /// Who asked, as the server authenticated it.
    pub caller: InboxCaller,
}

/// A hold of the inbox, with what the caller may do about it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InboxItem {
    /// The paused call (with its `agent`); answer it with
    /// [`RemoteAgent::approve`](crate::RemoteAgent::approve) or [`RemoteAgent::deny`](crate::RemoteAgent::deny) on that agent.
    #[serde(flatten)]
    pub call: PendingApproval,
    /// Whether the caller may answer it, has not approved it and it has
    /// not expired.
    #[serde(default)]
    pub for_me: bool,
    /// Why the caller may not answer it, when it may not.
    #[serde(default)]
    pub refused: Option<String>,
}

/// The inbox's counts, before its filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct InboxCounts {
    /// Holds waiting.
    pub waiting: usize,
    /// Of them, expired.
    pub expired: usize,
    /// Of them, partly approved.
    pub partial: usize,
    /// Of them, for the caller to answer.
    pub mine: usize,
}

/// A tool as the inbox describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InboxTool {
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its input's JSON Schema.
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// Its output's JSON Schema.
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// The caller as the server authenticated it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct InboxCaller {
    /// The principal (`None`: anonymous).
    #[serde(default)]
    pub principal: Option<String>,
    /// Its roles.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// The audit trail across the caller's agents (`GET /audit`), newest
/// first: every filter is optional and they combine; pages follow
/// [`AuditPage::next_cursor`] with [`after`](Self::after).
///
/// ```
/// use holdpoint_client::AuditFilter;
/// let filter = AuditFilter::new().snapshot("p-1").decision("approve");
/// assert_eq!(filter.snapshot_id.as_deref(), Some("p-1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditFilter {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only decisions by this actor (the record's actor, else its principal).
    pub actor: Option<String>,
    /// Only this decision (its wire name, e.g. `approve`, `deny`; `settle`
    /// for any decision of a settlement).
    pub decision: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only the decisions about this held snapshot, for anyone who may see
    /// the hold (an approver too, after another answered it); 404 otherwise.
    pub snapshot_id: Option<String>,
    /// Only records at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only records before this time.
    pub until: Option<DateTime<Utc>>,
    /// The page after this cursor (a previous page's `next_cursor`).
    pub cursor: Option<String>,
    /// At most this many per page (the server's default 50).
    pub limit: Option<usize>,
}

impl AuditFilter {
    /// The caller's whole trail.
    pub fn new() -> Self {
        AuditFilter::default()
    }

    /// Only agent `name`'s.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent = Some(name.into());
        self
    }

    /// Only tool `name`'s.
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// Only `actor`'s decisions.
    pub fn actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Only `decision`s (wire name).
    pub fn decision(mut self, decision: impl Into<String>) -> Self {
        self.decision = Some(decision.into());
        self
    }

    /// Only session `session_id`'s.
    pub fn session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Only the decisions about held snapshot `snapshot_id`.
    pub fn snapshot(mut self, snapshot_id: impl Into<String>) -> Self {
        self.snapshot_id = Some(snapshot_id.into());
        self
    }

    /// Only records at or after `at`.
    pub fn since(mut self, at: DateTime<Utc>) -> Self {
        self.since = Some(at);
        self
    }

    /// Only records before `at`.
    pub fn until(mut self, at: DateTime<Utc>) -> Self {
        self.until = Some(at);
        self
    }

    /// The page after `cursor`.
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// At most `limit` per page.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let text = |o: &Option<String>| o.clone().unwrap_or_default();
        let time = |o: Option<DateTime<Utc>>| {
            o.map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
                .unwrap_or_default()
        };
        vec![
            ("agent", text(&self.agent)),
            ("tool", text(&self.tool)),
            ("actor", text(&self.actor)),
            ("decision", text(&self.decision)),
            ("sessionId", text(&self.session_id)),
            ("snapshotId", text(&self.snapshot_id)),
            ("since", time(self.since)),
            ("until", time(self.until)),
            ("cursor", text(&self.cursor)),
            ("limit", self.limit.map(|n| n.to_string()).unwrap_or_default()),
        ]
    }
}

/// One page of the audit trail (`GET /audit`), newest first.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuditPage {
    /// The records of this page.
    pub items: Vec<AuditRecord>,
    /// How many records pass the filters, on all pages.
    pub total: usize,
    /// The cursor of the next page; `None` on the last one.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// Whether some agent had more rows than one listing reads.
    #[serde(default)]
    pub truncated: bool,
}

impl Client {
    /// One page of the approver's queue (`GET /inbox`): the holds the
    /// caller may answer or watch across its agents, filtered, in order,
    /// with the true total.
    pub async fn inbox(&self, query: InboxQuery) -> Result<InboxPage> {
        self.get_result("/inbox", &query.pairs()).await
    }

    /// One page of the audit trail across the caller's agents (`GET
    /// /audit`): the decisions it made or that were made on its behalf,
    /// and those about holds it may see (the `operator` role reads all).
    pub async fn audit(&self, filter: AuditFilter) -> Result<AuditPage> {
        self.get_result("/audit", &filter.pairs()).await
    }
}
