//! The outbox of hold events (docs/reference.md §11.3): rows a store writes
//! in the same transaction as the change they report, and the timers
//! (remind, escalate, expire, in doubt) kept in the same table.
//!
//! A store writes [`hold_events`] with every save that makes a snapshot
//! wait for an answer, and [`decided_events`] with every resume claim
//! (which carries the decisions' audit records). A delivery worker
//! (`holdpoint-notify`) then claims due rows with a lease
//! ([`SessionStore::claim_outbox`](super::SessionStore::claim_outbox)), so
//! each row is in flight in one process at a time, and settles them
//! ([`SessionStore::settle_outbox`](super::SessionStore::settle_outbox)).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::audit::AuditRecord;
use super::claim::lease_end;
use super::snapshot::Snapshot;
use crate::message::metadata;

/// `hold.created`: a call was held and waits for an answer.
pub const HOLD_CREATED: &str = "hold.created";
/// `hold.decided`: a hold was answered (approve, deny, respond, …).
pub const HOLD_DECIDED: &str = "hold.decided";
/// `hold.expired`: a hold reached its expiry unanswered.
pub const HOLD_EXPIRED: &str = "hold.expired";
/// `hold.escalated`: a hold stayed unanswered past `escalate_after`; more
/// roles may answer it.
pub const HOLD_ESCALATED: &str = "hold.escalated";
/// `hold.reminded`: a hold stayed unanswered past `remind_after`.
pub const HOLD_REMINDED: &str = "hold.reminded";
/// `hold.in_doubt`: the resume that claimed a hold stopped renewing its
/// lease with nothing written after it (docs/reference.md §8.2).
pub const HOLD_IN_DOUBT: &str = "hold.in_doubt";
/// `hold.partially_approved`: an approval was recorded that does not yet
/// complete the hold's quorum.
pub const HOLD_PARTIALLY_APPROVED: &str = "hold.partially_approved";

/// Every event type, in the order listings show them.
pub const EVENT_TYPES: &[&str] = &[
    HOLD_CREATED,
    HOLD_PARTIALLY_APPROVED,
    HOLD_DECIDED,
    HOLD_REMINDED,
    HOLD_ESCALATED,
    HOLD_EXPIRED,
    HOLD_IN_DOUBT,
];

/// Interrupt-data key: when to remind the approvers (RFC 3339).
pub const REMIND_AT: &str = "remindAt";
/// Interrupt-data key: when to escalate (RFC 3339).
pub const ESCALATE_AT: &str = "escalateAt";
/// Interrupt-data key: the roles an escalation adds (array of strings).
pub const ESCALATE_TO: &str = "escalateTo";
/// Interrupt-data key: what expiry does, `"deny"` or `"expire"`.
pub const ON_EXPIRE: &str = "onExpire";
/// Interrupt-data key: the roles that may answer (array of strings).
pub const APPROVERS: &str = "approvers";

/// Where an outbox row is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboxState {
    /// Not yet delivered: due at `dueAt` (later for retries and timers).
    Pending,
    /// Delivered to every channel that serves it.
    Delivered,
    /// Gave up after the last attempt (or a permanent refusal).
    Dead,
    /// Not to be delivered: a timer whose hold was answered first.
    Cancelled,
}

impl OutboxState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxState::Pending => "pending",
            OutboxState::Delivered => "delivered",
            OutboxState::Dead => "dead",
            OutboxState::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => OutboxState::Pending,
            "delivered" => OutboxState::Delivered,
            "dead" => OutboxState::Dead,
            "cancelled" => OutboxState::Cancelled,
            _ => return None,
        })
    }
}

/// What expiry does to an unanswered hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExpire {
    /// The hold stays, read as expired: an answer after it is refused as
    /// expired; only `hold.expired` is sent.
    #[default]
    Expire,
    /// The held call is denied (the model is told it expired; the audit
    /// records `expire`), then `hold.expired` is sent.
    Deny,
}

impl OnExpire {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExpire::Expire => "expire",
            OnExpire::Deny => "deny",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "expire" => Some(OnExpire::Expire),
            "deny" => Some(OnExpire::Deny),
            _ => None,
        }
    }
}

/// The timers of an approval rule (`remind_after`, `escalate_after` +
/// `escalate_to`, `expire_after` + `on_expire`): what the configuration
/// converts into. [`HoldTimers::stamp`] writes them into a hold's interrupt
/// data as deadlines, which the store turns into timer rows when it writes
/// the hold ([`hold_events`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HoldTimers {
    /// Notify the same approvers again after this long.
    pub remind_after: Option<Duration>,
    /// Escalate after this long.
    pub escalate_after: Option<Duration>,
    /// The roles an escalation lets answer (and notifies).
    pub escalate_to: Vec<String>,
    /// The hold expires after this long.
    pub expire_after: Option<Duration>,
    /// What expiry does.
    pub on_expire: OnExpire,
}

impl HoldTimers {
    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.remind_after.is_none() && self.escalate_after.is_none() && self.expire_after.is_none()
    }

    /// Writes the deadlines, counted from `now`, into `data` (a hold's
    /// interrupt data): [`REMIND_AT`], [`ESCALATE_AT`] with
    /// [`ESCALATE_TO`], and `expiresAt` with [`ON_EXPIRE`]. An expiry
    /// already in `data` that is earlier is kept.
    pub fn stamp(&self, data: &mut Map<String, Value>, now: DateTime<Utc>) {
        let at = |d: Duration| Value::String(rfc3339(lease_end(now, d)));
        if let Some(d) = self.remind_after {
            data.insert(REMIND_AT.into(), at(d));
        }
        if let Some(d) = self.escalate_after {
            data.insert(ESCALATE_AT.into(), at(d));
            data.insert(
                ESCALATE_TO.into(),
                Value::Array(self.escalate_to.iter().cloned().map(Value::String).collect()),
            );
        }
        if let Some(d) = self.expire_after {
            let ours = lease_end(now, d);
            let earlier = data
                .get(metadata::EXPIRES_AT)
                .and_then(Value::as_str)
                .and_then(parse_time)
                .is_some_and(|t| t <= ours);
            if !earlier {
                data.insert(metadata::EXPIRES_AT.into(), Value::String(rfc3339(ours)));
            }
            data.insert(ON_EXPIRE.into(), Value::String(self.on_expire.as_str().into()));
        }
    }
}

/// One outbox row: an event to deliver, or a timer that becomes one when
/// it falls due.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxEvent {
    /// Its id: the idempotency key every delivery of it carries (the
    /// webhook's `webhook-id`).
    pub id: String,
    /// The event type ([`HOLD_CREATED`], …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether this is a timer: when due, the worker first checks that the
    /// hold still waits (else the row is cancelled).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timer: bool,
    /// The snapshot that holds the call.
    pub snapshot_id: String,
    /// Its session.
    pub session_id: String,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The payload's `data` (without `url`, which the deliverer adds).
    pub data: Value,
    /// When the row was written.
    pub created_at: DateTime<Utc>,
    /// When it is due (next attempt, or the timer's deadline).
    pub due_at: DateTime<Utc>,
    /// Where it is in its life.
    pub state: OutboxState,
    /// How many deliveries were started (counted when claimed).
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed (never a secret: deliverers redact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Until when the current claim holds it (`None`: unclaimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<DateTime<Utc>>,
    /// The channels it was delivered to (or that refused it for good), so
    /// a retry sends only to the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<String>,
}

impl OutboxEvent {
    /// A pending event of `kind` about `snapshot_id`, due at `due_at`.
    pub fn new(
        kind: &str,
        snapshot_id: &str,
        session_id: &str,
        agent: Option<&str>,
        data: Value,
        due_at: DateTime<Utc>,
    ) -> Self {
        let now = Utc::now();
        OutboxEvent {
            id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
            kind: kind.to_owned(),
            timer: false,
            snapshot_id: snapshot_id.to_owned(),
            session_id: session_id.to_owned(),
            agent: agent.map(str::to_owned),
            data,
            created_at: now,
            due_at,
            state: OutboxState::Pending,
            attempts: 0,
            last_error: None,
            lease_until: None,
            done: Vec::new(),
        }
    }

    /// Makes this row a timer.
    pub fn as_timer(mut self) -> Self {
        self.timer = true;
        self
    }

    /// The call's ref, from the data.
    pub fn reference(&self) -> Option<&str> {
        self.data.get("ref").and_then(Value::as_str)
    }

    /// The roles the data names as approvers.
    pub fn approvers(&self) -> Vec<&str> {
        self.data
            .get(APPROVERS)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether it is claimable at `now`: pending, due, and not leased.
    pub fn claimable(&self, now: DateTime<Utc>) -> bool {
        self.state == OutboxState::Pending && self.due_at <= now && self.lease_until.is_none_or(|l| l <= now)
    }
}

/// A claimed outbox row and the token that proves the claim: settling it
/// needs the token, so a worker whose lease lapsed (and whose row another
/// took) cannot settle the other's claim.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxLease {
    /// The row as claimed (`attempts` already counts this attempt).
    pub event: OutboxEvent,
    /// The claim's token.
    pub token: String,
}

/// How a claimed row ends its attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum OutboxOutcome {
    /// Delivered everywhere: the row is done.
    Delivered {
        /// The channels it reached.
        done: Vec<String>,
    },
    /// Try again at `due_at` (a retry after a failure, or a timer pushed
    /// back, e.g. an in-doubt check whose lease was renewed).
    Retry {
        /// When to try again.
        due_at: DateTime<Utc>,
        /// Why (absent for a postponed timer).
        error: Option<String>,
        /// The channels reached so far.
        done: Vec<String>,
        /// Whether this attempt counts against the limit (a postponed
        /// timer's does not).
        counted: bool,
    },
    /// Give up: the row is dead.
    Dead {
        /// Why.
        error: String,
        /// The channels reached before.
        done: Vec<String>,
    },
    /// Not to be delivered (a timer whose hold was answered).
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// Which outbox rows to list (filters combine; oldest due first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxQuery {
    /// Only rows in this state.
    pub state: Option<OutboxState>,
    /// Only this snapshot's.
    pub snapshot_id: Option<String>,
    /// At most this many (default 100).
    pub limit: Option<usize>,
}

impl OutboxQuery {
    /// Whether `event` passes the filters.
    pub fn matches(&self, event: &OutboxEvent) -> bool {
        self.state.is_none_or(|s| event.state == s) && self.snapshot_id.as_ref().is_none_or(|s| &event.snapshot_id == s)
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// Applies `outcome` to a claimed row in place, for store implementations
/// (the store checked the claim's token first).
pub fn apply_outcome(event: &mut OutboxEvent, outcome: OutboxOutcome) {
    event.lease_until = None;
    match outcome {
        OutboxOutcome::Delivered { done } => {
            event.state = OutboxState::Delivered;
            event.done = done;
        }
        OutboxOutcome::Retry {
            due_at,
            error,
            done,
            counted,
        } => {
            event.state = OutboxState::Pending;
            event.due_at = due_at;
            if error.is_some() {
                event.last_error = error;
            }
            event.done = done;
            if !counted {
                event.attempts = event.attempts.saturating_sub(1);
            }
        }
        OutboxOutcome::Dead { error, done } => {
            event.state = OutboxState::Dead;
            event.last_error = Some(error);
            event.done = done;
        }
        OutboxOutcome::Cancelled { reason } => {
            event.state = OutboxState::Cancelled;
            event.last_error = Some(reason);
        }
    }
}

/// Makes a dead (or any) row pending again, due now, with its attempts
/// reset: what an operator's retry does. The channels it reached stay
/// reached.
pub fn apply_retry(event: &mut OutboxEvent, now: DateTime<Utc>) {
    event.state = OutboxState::Pending;
    event.due_at = now;
    event.attempts = 0;
    event.lease_until = None;
}

/// The events a store writes with a save of `row`, when `row` waits for an
/// answer and `was_waiting` (the row it replaces waited too) is false: a
/// `hold.created` per paused call, and the timer rows its interrupt data
/// asks for ([`REMIND_AT`], [`ESCALATE_AT`], `expiresAt`). Nothing for any
/// other save, and nothing for a claim marker.
pub fn hold_events(was_waiting: bool, row: &Snapshot) -> Vec<OutboxEvent> {
    if was_waiting || !row.is_waiting() || row.is_state_claim() {
        return Vec::new();
    }
    let Some(last) = row.state.as_ref().and_then(|s| s.messages.last()) else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut out = Vec::new();
    for part in last.interrupts() {
        let Some(req) = part.as_tool_request() else { continue };
        let interrupt = part.interrupt_data().unwrap_or_default();
        let approvers = interrupt.get(APPROVERS).cloned().unwrap_or_else(|| json!([]));
        let expires_at = part.expires_at();
        let mut data = json!({
            "agent": row.agent,
            "sessionId": row.session_id,
            "snapshotId": row.snapshot_id,
            "ref": req.reference,
            "tool": req.name,
            "input": req.input.clone().unwrap_or(Value::Null),
            "interrupt": Value::Object(interrupt.clone()),
            "approvers": approvers,
            "decisions": [],
        });
        if let (Some(at), Some(obj)) = (expires_at, data.as_object_mut()) {
            obj.insert("expiresAt".into(), Value::String(rfc3339(at)));
        }
        let event = |kind: &str, data: Value, due: DateTime<Utc>| {
            OutboxEvent::new(kind, &row.snapshot_id, &row.session_id, row.agent.as_deref(), data, due)
        };
        out.push(event(HOLD_CREATED, data.clone(), now));
        let at = |key: &str| interrupt.get(key).and_then(Value::as_str).and_then(parse_time);
        if let Some(due) = at(REMIND_AT) {
            out.push(event(HOLD_REMINDED, data.clone(), due).as_timer());
        }
        if let Some(due) = at(ESCALATE_AT) {
            let mut escalated = data.clone();
            let mut roles: Vec<Value> = escalated
                .get(APPROVERS)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for extra in interrupt
                .get(ESCALATE_TO)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !roles.contains(extra) {
                    roles.push(extra.clone());
                }
            }
            if let Some(obj) = escalated.as_object_mut() {
                obj.insert(APPROVERS.into(), Value::Array(roles));
                obj.insert(
                    ESCALATE_TO.into(),
                    interrupt.get(ESCALATE_TO).cloned().unwrap_or_else(|| json!([])),
                );
            }
            out.push(event(HOLD_ESCALATED, escalated, due).as_timer());
        }
        if let Some(due) = expires_at {
            let mut expired = data.clone();
            let on_expire = interrupt
                .get(ON_EXPIRE)
                .and_then(Value::as_str)
                .and_then(OnExpire::parse)
                .unwrap_or_default();
            if let Some(obj) = expired.as_object_mut() {
                obj.insert(ON_EXPIRE.into(), Value::String(on_expire.as_str().into()));
            }
            out.push(event(HOLD_EXPIRED, expired, due).as_timer());
        }
    }
    out
}

/// The events a store writes with a resume claim carrying `audit` (the
/// decisions about the claimed snapshot's calls), claimed until
/// `lease_until`: a `hold.decided` per decision, and one `hold.in_doubt`
/// timer at `lease_until`, which the worker pushes back while the lease is
/// renewed and cancels once the resume wrote its outcome.
pub fn decided_events(snapshot_id: &str, lease_until: DateTime<Utc>, audit: &[AuditRecord]) -> Vec<OutboxEvent> {
    let Some(first) = audit.first() else {
        return Vec::new();
    };
    let now = Utc::now();
    let mut out: Vec<OutboxEvent> = audit
        .iter()
        .map(|r| {
            let data = json!({
                "agent": r.agent,
                "sessionId": r.session_id,
                "snapshotId": r.snapshot_id,
                "ref": r.reference,
                "tool": r.tool,
                "input": r.input.clone().unwrap_or(Value::Null),
                "interrupt": Value::Null,
                "approvers": [],
                "decisions": [decision_json(r)],
            });
            OutboxEvent::new(HOLD_DECIDED, snapshot_id, &r.session_id, r.agent.as_deref(), data, now)
        })
        .collect();
    let data = json!({
        "agent": first.agent,
        "sessionId": first.session_id,
        "snapshotId": snapshot_id,
        "ref": Value::Null,
        "tool": Value::Null,
        "input": Value::Null,
        "interrupt": Value::Null,
        "approvers": [],
        "decisions": audit.iter().map(decision_json).collect::<Vec<_>>(),
    });
    out.push(
        OutboxEvent::new(
            HOLD_IN_DOUBT,
            snapshot_id,
            &first.session_id,
            first.agent.as_deref(),
            data,
            lease_until,
        )
        .as_timer(),
    );
    out
}

/// The event of an approval that does not yet complete a hold's quorum:
/// the hook the quorum's store path writes in the transaction that records
/// the approval. `decisions` are the approvals so far.
pub fn partial_approval_event(
    row: &Snapshot,
    reference: Option<&str>,
    tool: &str,
    decisions: &[AuditRecord],
) -> OutboxEvent {
    let data = json!({
        "agent": row.agent,
        "sessionId": row.session_id,
        "snapshotId": row.snapshot_id,
        "ref": reference,
        "tool": tool,
        "input": Value::Null,
        "interrupt": Value::Null,
        "approvers": [],
        "decisions": decisions.iter().map(decision_json).collect::<Vec<_>>(),
    });
    OutboxEvent::new(
        HOLD_PARTIALLY_APPROVED,
        &row.snapshot_id,
        &row.session_id,
        row.agent.as_deref(),
        data,
        Utc::now(),
    )
}

/// The refusal of a settle whose claim is no longer the row's
/// (`FAILED_PRECONDITION`), for store implementations.
pub fn lease_lost(id: &str) -> crate::error::Error {
    crate::error::Error::FailedPrecondition(format!(
        "outbox event {id} is no longer claimed by this worker (its lease lapsed and another claimed it)"
    ))
}

fn decision_json(r: &AuditRecord) -> Value {
    json!({
        "decision": r.decision.as_str(),
        "actor": r.actor,
        "principal": r.principal,
        "reason": r.reason,
        "at": rfc3339(r.at),
        "ref": r.reference,
        "tool": r.tool,
    })
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, Part, Role};
    use crate::model::FinishReason;
    use crate::session::{AuditDecision, SessionState};

    fn held(interrupt: Value) -> Snapshot {
        let mut paused = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 50000})));
        paused.set_meta(metadata::INTERRUPT, interrupt);
        let mut state = SessionState::new("s1");
        state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![paused])];
        let mut row = Snapshot::new(state);
        row.snapshot_id = "snap".into();
        row.agent = Some("bank".into());
        row.finish_reason = Some(FinishReason::Interrupted);
        row
    }

    #[test]
    fn a_waiting_row_makes_one_created_event_per_call_and_its_timers() {
        let mut data = Map::new();
        data.insert(APPROVERS.into(), json!(["finance"]));
        let timers = HoldTimers {
            remind_after: Some(Duration::from_secs(60)),
            escalate_after: Some(Duration::from_secs(120)),
            escalate_to: vec!["cfo".into()],
            expire_after: Some(Duration::from_secs(180)),
            on_expire: OnExpire::Deny,
        };
        let now = Utc::now();
        timers.stamp(&mut data, now);
        let events = hold_events(false, &held(Value::Object(data)));
        let kinds: Vec<_> = events.iter().map(|e| (e.kind.as_str(), e.timer)).collect();
        assert_eq!(
            kinds,
            [
                (HOLD_CREATED, false),
                (HOLD_REMINDED, true),
                (HOLD_ESCALATED, true),
                (HOLD_EXPIRED, true)
            ]
        );
        assert_eq!(events[0].data["tool"], "transferMoney");
        assert_eq!(events[0].data["input"]["amount"], 50000);
        assert_eq!(events[0].data["approvers"], json!(["finance"]));
        assert_eq!(events[2].data["approvers"], json!(["finance", "cfo"]));
        assert_eq!(events[3].data[ON_EXPIRE], "deny");
        assert!(events[3].due_at > now + chrono::Duration::seconds(170));
        // A save that leaves a waiting row waiting, or of a row that does
        // not wait, writes nothing.
        assert!(hold_events(true, &held(json!(true))).is_empty());
        let mut done = held(json!(true));
        done.finish_reason = Some(FinishReason::Stop);
        assert!(hold_events(false, &done).is_empty());
    }

    #[test]
    fn a_claim_makes_decided_events_and_an_in_doubt_timer() {
        let record = AuditRecord {
            id: "a1".into(),
            at: Utc::now(),
            principal: Some("bob".into()),
            actor: Some("bob".into()),
            agent: Some("bank".into()),
            session_id: "s1".into(),
            snapshot_id: "snap".into(),
            tool: "transferMoney".into(),
            reference: Some("r1".into()),
            input_hash: String::new(),
            input: None,
            original_input: None,
            original_input_hash: None,
            decision: AuditDecision::Approve,
            reason: None,
            held_by: None,
            settles: false,
            mcp: None,
            grant: None,
        };
        let lease = Utc::now() + chrono::Duration::seconds(60);
        let events = decided_events("snap", lease, &[record]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind, HOLD_DECIDED);
        assert_eq!(events[0].data["decisions"][0]["decision"], "approve");
        assert_eq!(events[1].kind, HOLD_IN_DOUBT);
        assert!(events[1].timer);
        assert_eq!(events[1].due_at, lease);
        assert!(decided_events("snap", lease, &[]).is_empty());
    }

    #[test]
    fn outcomes_move_rows() {
        let mut e = OutboxEvent::new(HOLD_CREATED, "s", "x", None, json!({}), Utc::now());
        e.attempts = 1;
        apply_outcome(
            &mut e,
            OutboxOutcome::Retry {
                due_at: Utc::now(),
                error: None,
                done: vec![],
                counted: false,
            },
        );
        assert_eq!((e.state, e.attempts), (OutboxState::Pending, 0));
        apply_outcome(
            &mut e,
            OutboxOutcome::Dead {
                error: "x".into(),
                done: vec!["a".into()],
            },
        );
        assert_eq!(e.state, OutboxState::Dead);
        apply_retry(&mut e, Utc::now());
        assert!(e.claimable(Utc::now()));
        assert_eq!(e.done, ["a"]);
    }
}
