//! What approvers and operators do over HTTP (docs/reference.md §10.7–§10.9,
//! §8, §12.2, §12.8): list the holds they may answer, read them, answer
//! them (approve, deny, approve with a standing grant), list and revoke
//! grants, list and settle calls in doubt, and read the inbox and the audit
//! trail. `holdpoint-server` only ([`Layout::Holdpoint`](crate::Layout)).
//!
//! Who may do what is the server's to decide from the credentials: an
//! approver (a role an approval rule names) sees and answers the holds of
//! that rule in anyone's session, and nothing else of it; the session's
//! owner resumes its own session with [`RemoteAgent::run`]. An approver
//! answers with [`RemoteAgent::answer`] (or [`approve`](RemoteAgent::approve)
//! / [`deny`](RemoteAgent::deny) of a listed call), never by resuming the
//! owner's session: that is `NOT_FOUND` for anyone but the owner.

use holdpoint::Resume;
use holdpoint::agent::{AgentOutput, Answer, AnswerKind, PendingApproval};
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::{AuditRecord, HoldApproval, Snapshot};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::RemoteAgent;
use crate::client::Client;
use crate::error::{ClientError, Result, fail_loudly};

/// Which rows of one agent a per-agent listing returns
/// (`GET /agents/{name}/pending`, `/inDoubt`, `/audit`): one session's, or
/// all the caller may see, at most `limit` (the server's default 100,
/// capped by its listing limit).
///
/// Whose rows they are is not a filter the caller picks: the server lists
/// the caller's own sessions and the holds its roles may answer. For the
/// filters of the approver's queue (tool, role, expired, mine, partial,
/// text, order, cursor) see [`InboxQuery`](crate::InboxQuery).
///
/// ```
/// use holdpoint_client::ListQuery;
/// let query = ListQuery::new().session("s-1").limit(20);
/// assert_eq!(query.session_id.as_deref(), Some("s-1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListQuery {
    /// Only this session's (404 unless the caller may see it).
    pub session_id: Option<String>,
    /// At most this many.
    pub limit: Option<usize>,
}

impl ListQuery {
    /// Everything the caller may see, the server's default number.
    pub fn new() -> Self {
        ListQuery::default()
    }

    /// Only session `session_id`'s.
    pub fn session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// At most `limit`.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("sessionId", self.session_id.clone().unwrap_or_default()),
            ("limit", self.limit.map(|n| n.to_string()).unwrap_or_default()),
        ]
    }
}

/// What an answer did (`POST /agents/{name}/answer`); the wire form of the
/// core's [`Answered`](holdpoint::agent::Answered).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnswerOutcome {
    /// An approval was recorded and the rule's quorum is not met yet.
    Recorded {
        /// Whether this approval was new (the same approver again counts once).
        counted: bool,
        /// The rule's quorum.
        quorum: Option<u32>,
        /// The approvals so far, oldest first.
        approvals: Vec<HoldApproval>,
    },
    /// The answer decided the hold and the session was resumed as its
    /// owner: the resumed turn's output.
    Resumed(Box<AgentOutput>),
    /// An approval with a grant: the session was resumed and the grant
    /// stored.
    Granted {
        /// The resumed turn's output.
        output: Box<AgentOutput>,
        /// The grant created.
        grant: Box<Grant>,
    },
}

impl AnswerOutcome {
    /// Whether the answer decided the hold (the session was resumed).
    pub fn is_decided(&self) -> bool {
        !matches!(self, AnswerOutcome::Recorded { .. })
    }

    /// The resumed turn's output, once decided.
    pub fn output(&self) -> Option<&AgentOutput> {
        match self {
            AnswerOutcome::Recorded { .. } => None,
            AnswerOutcome::Resumed(out) | AnswerOutcome::Granted { output: out, .. } => Some(out),
        }
    }

    /// The grant the approval created, if it asked for one.
    pub fn grant(&self) -> Option<&Grant> {
        match self {
            AnswerOutcome::Granted { grant, .. } => Some(grant),
            _ => None,
        }
    }
}

/// The `result` of `POST /agents/{name}/answer`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerWire {
    decided: bool,
    #[serde(default)]
    counted: Option<bool>,
    #[serde(default)]
    quorum: Option<u32>,
    #[serde(default)]
    approvals: Vec<HoldApproval>,
    #[serde(default)]
    output: Option<Box<AgentOutput>>,
    #[serde(default)]
    grant: Option<Box<Grant>>,
}

/// The query of `GET /grants`: `agent`, `tool`, `limit`, and `active=true`
/// when `active_at` is set (the server judges "active" by its own clock;
/// the time itself is not sent).
fn grant_pairs(query: &GrantQuery) -> Vec<(&'static str, String)> {
    vec![
        ("agent", query.agent.clone().unwrap_or_default()),
        ("tool", query.tool.clone().unwrap_or_default()),
        (
            "active",
            if query.active_at.is_some() {
                "true".into()
            } else {
                String::new()
            },
        ),
        ("limit", query.limit.map(|n| n.to_string()).unwrap_or_default()),
    ]
}

/// A listing's array: the `result` itself, or its `items`.
fn items_of<T: serde::de::DeserializeOwned>(url: &str, listed: Value) -> Result<Vec<T>> {
    let items = match listed {
        Value::Object(mut map) => map.remove("items").unwrap_or(Value::Array(Vec::new())),
        other => other,
    };
    serde_json::from_value(items).map_err(|e| ClientError::protocol(url, e.to_string()))
}

impl Client {
    /// The standing grants the caller may manage (`GET /grants`): those of
    /// holds it may answer, across its agents, newest first. The query's
    /// `agent`, `tool` and `limit` are sent; `active_at: Some(_)` asks for
    /// the grants active now (by the server's clock). A grant is created by
    /// an approval that asks for one ([`Answer::grant`], then
    /// [`AnswerOutcome::grant`]).
    pub async fn grants(&self, query: GrantQuery) -> Result<Vec<Grant>> {
        self.get_result("/grants", &grant_pairs(&query)).await
    }

    /// Revokes grant `id` (`DELETE /grants/{id}`): it stops matching at
    /// once, on every replica; revoking again changes nothing. `NOT_FOUND`
    /// (404) for a grant the caller may not manage.
    pub async fn revoke_grant(&self, id: &str) -> Result<Grant> {
        self.delete_result(&format!("/grants/{}", encode_segment(id))).await
    }
}

/// A path segment, percent-encoded.
pub(crate) fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl RemoteAgent {
    /// The paused calls of this agent the caller may see, newest first, at
    /// most `limit`: its own, and those its roles may answer. For one
    /// session's, see [`pending_where`](Self::pending_where); for the
    /// approver's queue with filters and pages, [`inbox`](Self::inbox).
    pub async fn pending(&self, limit: usize) -> Result<Vec<PendingApproval>> {
        self.pending_where(ListQuery::new().limit(limit)).await
    }

    /// The paused calls of this agent `query` selects that the caller may
    /// see (`GET /agents/{name}/pending?sessionId=&limit=`): its own, and
    /// those its roles may answer in anyone's session (§10.7), newest
    /// first. [`pending`](Self::pending) is `pending_where(ListQuery::new().limit(n))`.
    pub async fn pending_where(&self, query: ListQuery) -> Result<Vec<PendingApproval>> {
        let path = self.path("/pending");
        let listed: Value = self.client.get_result(&path, &query.pairs()).await?;
        items_of(&self.client.url(&path), listed)
    }

    /// One person's answer to one paused call (`POST
    /// /agents/{name}/answer`), checked against the approval rule that
    /// governs it: how an approver answers a hold in someone else's
    /// session (and how an owner answers their own with approve or deny).
    ///
    /// Short of a rule's quorum the approval is recorded
    /// ([`AnswerOutcome::Recorded`]); the answer that decides resumes the
    /// session as its owner and returns the turn's output (a failed turn is
    /// [`ClientError::TurnFailed`]). Refusals: `PERMISSION_DENIED` (403)
    /// naming the rule, nothing written; `NOT_FOUND` (404) for a hold the
    /// caller may not see; `ABORTED` (409) when another answer decided it;
    /// `INVALID_ARGUMENT` (400) for a yes or no the tool's own question
    /// cannot take (its message says what to add).
    pub async fn answer(&self, answer: Answer) -> Result<AnswerOutcome> {
        let wire: AnswerWire = self
            .client
            .call(&self.path("/answer"), &json!({ "data": answer }))
            .await?;
        if !wire.decided {
            return Ok(AnswerOutcome::Recorded {
                counted: wire.counted.unwrap_or(true),
                quorum: wire.quorum,
                approvals: wire.approvals,
            });
        }
        let url = self.client.url(&self.path("/answer"));
        let output = wire
            .output
            .ok_or_else(|| ClientError::protocol(&url, "a decided answer without its `output`"))?;
        let output = Box::new(fail_loudly(*output)?);
        Ok(match wire.grant {
            Some(grant) => AnswerOutcome::Granted { output, grant },
            None => AnswerOutcome::Resumed(output),
        })
    }

    /// Approves `call` (as listed by [`pending`](Self::pending),
    /// [`pending_where`](Self::pending_where) or the inbox): an
    /// [`answer`](Self::answer) naming its snapshot, ref and tool.
    pub async fn approve(&self, call: &PendingApproval) -> Result<AnswerOutcome> {
        self.answer(answer_to(call, AnswerKind::Approve, None)).await
    }

    /// Denies `call` with `reason` (the model sees it): an
    /// [`answer`](Self::answer) naming its snapshot, ref and tool.
    pub async fn deny(&self, call: &PendingApproval, reason: Option<&str>) -> Result<AnswerOutcome> {
        self.answer(answer_to(call, AnswerKind::Deny, reason)).await
    }

    /// The calls of this agent in doubt that the caller may settle (`GET
    /// /agents/{name}/inDoubt`): a resume claimed them and its process died,
    /// so they may or may not have run (§8.2). The hold's approvers and the
    /// `operator` role see them; each has `in_doubt` set and the decisions
    /// recorded for it in `decided`.
    pub async fn in_doubt(&self, query: ListQuery) -> Result<Vec<PendingApproval>> {
        let path = self.path("/inDoubt");
        let listed: Value = self.client.get_result(&path, &query.pairs()).await?;
        items_of(&self.client.url(&path), listed)
    }

    /// Settles the calls in doubt of `snapshot_id` (`POST
    /// /agents/{name}/settle`, §8.3): `respond` with what the call did, or
    /// `restart` to run it again deliberately; the turn goes on from there.
    /// `FAILED_PRECONDITION` (400) when the snapshot is not in doubt,
    /// `PERMISSION_DENIED` (403) for a caller the rule refuses, `NOT_FOUND`
    /// (404) for unknown or foreign ids, `ABORTED` (409) when another
    /// settlement won; a failed turn is [`ClientError::TurnFailed`].
    pub async fn settle(&self, snapshot_id: &str, resume: Resume) -> Result<AgentOutput> {
        let body = json!({"data": {"snapshotId": snapshot_id, "resume": resume}});
        let out: AgentOutput = self.client.call(&self.path("/settle"), &body).await?;
        fail_loudly(out)
    }

    /// This agent's decisions (`GET /agents/{name}/audit`), newest first:
    /// of one session the caller may see, or else the caller's own. For the
    /// trail across agents, with filters and pages, see [`Client::audit`].
    pub async fn audit(&self, query: ListQuery) -> Result<Vec<AuditRecord>> {
        let path = self.path("/audit");
        let listed: Value = self.client.get_result(&path, &query.pairs()).await?;
        items_of(&self.client.url(&path), listed)
    }

    /// The standing grants of this agent the caller may manage
    /// ([`Client::grants`] with `agent` set to this one).
    pub async fn grants(&self, query: GrantQuery) -> Result<Vec<Grant>> {
        let query = GrantQuery {
            agent: Some(self.name().to_owned()),
            ..query
        };
        self.client.grants(query).await
    }

    /// Revokes grant `id` ([`Client::revoke_grant`]).
    pub async fn revoke_grant(&self, id: &str) -> Result<Grant> {
        self.client.revoke_grant(id).await
    }

    /// One page of the inbox for this agent ([`Client::inbox`] with
    /// `agent` set to this one).
    pub async fn inbox(&self, query: crate::InboxQuery) -> Result<crate::InboxPage> {
        self.client.inbox(query.agent(self.name())).await
    }

    /// The snapshot `snapshot_id` without its conversation state
    /// (`metadataOnly`): status, owner, approvals, times.
    pub async fn snapshot_metadata(&self, snapshot_id: &str) -> Result<Snapshot> {
        let body = json!({"data": {"snapshotId": snapshot_id, "metadataOnly": true}});
        self.client.call(&self.path("/getSnapshot"), &body).await
    }
}

/// The answer to `call`: its snapshot, ref and tool, yes or no, and why.
fn answer_to(call: &PendingApproval, decision: AnswerKind, reason: Option<&str>) -> Answer {
    let mut answer = Answer::approve(call.snapshot_id.clone());
    answer.reference = call.reference.clone();
    answer.tool = Some(call.tool.clone());
    answer.decision = decision;
    answer.reason = reason.map(str::to_owned);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AuditFilter;
    use chrono::DateTime;

    #[test]
    fn segments_and_queries_are_encoded_and_empty_filters_left_out() {
        assert_eq!(encode_segment("g-1/../x y"), "g-1%2F..%2Fx%20y");
        let pairs = ListQuery::new().limit(3).pairs();
        assert_eq!(pairs[0], ("sessionId", String::new()));
        assert_eq!(pairs[1], ("limit", "3".to_owned()));
        let client = Client::new("http://127.0.0.1:1");
        let since = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z").unwrap().to_utc();
        let filter = AuditFilter::new().actor("o l+a").since(since);
        let url = client.url_with("/audit", &filter.pairs()).unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:1/audit?actor=o+l%2Ba&since=2026-01-02T03%3A04%3A05Z"
        );
    }
}
