//! The in-memory store's outbox (docs/reference.md §11.3): rows written
//! as kind and ids only, their payload built when claimed or listed;
//! claims by lease and token, settles, retries and listings, under the
//! store's lock.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::rows::Rows;
use super::stored::Stored;
use crate::error::{Error, Result};
use crate::session::audit::AuditRecord;
use crate::session::claim::ResumeClaim;
use crate::session::outbox::{
    Decisions, HOLD_CREATED, HOLD_DECIDED, HOLD_IN_DOUBT, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery,
    apply_outcome, apply_retry, call_payload, decision_payload, hold_stubs, lease_lost,
};
use crate::session::snapshot::Snapshot;
use crate::session::write::mint_id;

/// Why a row is cancelled when its payload cannot be built: its snapshot
/// was deleted (pruned) before delivery.
const GONE: &str = "not sent: the snapshot was deleted (pruned) before delivery";

/// One outbox row. Its `event.data` is `Null` unless it was given whole
/// ([`Source::Whole`]); the payload is built from `source` when the row is
/// claimed or listed.
pub(super) struct Queued {
    pub(super) event: OutboxEvent,
    /// What its payload is built from.
    source: Source,
    /// The token of its current claim.
    token: Option<String>,
}

/// What a row's payload is built from.
enum Source {
    /// The row carries it (`enqueue_outbox`).
    Whole,
    /// The paused call of this index in the row's snapshot (which never
    /// changes apart from its claim fields).
    Call(usize),
    /// The claim's audit records (shared with the audit log).
    Claim(Arc<[AuditRecord]>, Decisions),
}

impl Queued {
    fn new(event: OutboxEvent, source: Source) -> Self {
        Queued {
            event,
            source,
            token: None,
        }
    }
}

impl Rows {
    /// Queues the rows of a save of `row` that the store writes (see
    /// `hold_events`), as kind and ids.
    pub(super) fn queue_hold(&mut self, was_waiting: bool, row: &Snapshot) {
        for (kind, call, due) in hold_stubs(was_waiting, row) {
            if !self.writes.writes(kind) {
                continue;
            }
            let mut event = OutboxEvent::new(
                kind,
                &row.snapshot_id,
                &row.session_id,
                row.agent.as_deref(),
                Value::Null,
                due,
            );
            event.timer = kind != HOLD_CREATED;
            self.outbox.push(Box::new(Queued::new(event, Source::Call(call))));
        }
    }

    /// Queues the rows of a resume claim carrying `batch` that the store
    /// writes (see `decided_events`), as kind and ids.
    pub(super) fn queue_decided(&mut self, claim: &ResumeClaim, batch: &Arc<[AuditRecord]>) {
        let Some(first) = batch.first() else { return };
        let id = claim.snapshot_id.as_str();
        if self.writes.tells() {
            let now = Utc::now();
            for (i, r) in batch.iter().enumerate() {
                let event = OutboxEvent::new(HOLD_DECIDED, id, &r.session_id, r.agent.as_deref(), Value::Null, now);
                let source = Source::Claim(Arc::clone(batch), Decisions::One(i));
                self.outbox.push(Box::new(Queued::new(event, source)));
            }
        }
        if self.writes.writes(HOLD_IN_DOUBT) {
            let event = OutboxEvent::new(
                HOLD_IN_DOUBT,
                id,
                &first.session_id,
                first.agent.as_deref(),
                Value::Null,
                claim.lease_until,
            );
            let source = Source::Claim(Arc::clone(batch), Decisions::All);
            self.outbox.push(Box::new(Queued::new(event.as_timer(), source)));
        }
    }

    /// Queues rows given whole (a partial approval's), those the store
    /// writes.
    pub(super) fn enqueue(&mut self, events: Vec<OutboxEvent>) {
        let writes = self.writes;
        self.outbox.extend(
            events
                .into_iter()
                .filter(|e| writes.writes(&e.kind))
                .map(|e| Box::new(Queued::new(e, Source::Whole))),
        );
    }

    /// Before row `id` is rewritten in place (an escalation records the
    /// roles it adds on the hold): the rows that build their payload from
    /// it take it now, from the row as it still is, so every row's payload
    /// stays the one of the row it reports. A scan of the outbox, on
    /// rewrites only (saves under a new id, and claims, do not scan).
    pub(super) fn freeze_payloads(&mut self, id: &str) {
        for i in 0..self.outbox.len() {
            let row = &self.outbox[i];
            if !matches!(row.source, Source::Call(_)) || row.event.snapshot_id != id {
                continue;
            }
            if let Some(data) = self.payload(row) {
                let row = &mut self.outbox[i];
                row.event.data = data;
                row.source = Source::Whole;
            }
        }
    }

    /// The payload of `row`, built now; `None` when its snapshot is gone.
    fn payload(&self, row: &Queued) -> Option<Value> {
        let event = &row.event;
        match &row.source {
            Source::Whole => Some(event.data.clone()),
            Source::Call(call) => match self.rows.get(event.snapshot_id.as_str())? {
                Stored::Live(held) => call_payload(&event.kind, held, *call),
                packed => call_payload(&event.kind, &packed.to_snapshot(&event.snapshot_id).ok()?, *call),
            },
            Source::Claim(batch, which) => decision_payload(&event.snapshot_id, batch, *which),
        }
    }

    /// A copy of `row` with its payload.
    fn whole(&self, row: &Queued) -> OutboxEvent {
        let data = self.payload(row).unwrap_or(Value::Null);
        OutboxEvent {
            data,
            ..clone_bare(&row.event)
        }
    }

    /// See `OutboxStore::claim_outbox`. A row whose payload cannot be
    /// built (its snapshot was pruned first) is cancelled, not claimed.
    pub(super) fn claim_outbox(
        &mut self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Vec<OutboxLease> {
        let mut due: Vec<usize> = (0..self.outbox.len())
            .filter(|&i| self.outbox[i].event.claimable(now))
            .collect();
        due.sort_by_key(|&i| self.outbox[i].event.due_at);
        due.truncate(limit);
        let until = crate::session::snapshot::lease_end(now, lease);
        let mut out = Vec::with_capacity(due.len());
        for i in due {
            let Some(data) = self.payload(&self.outbox[i]) else {
                apply_outcome(
                    &mut self.outbox[i].event,
                    OutboxOutcome::Cancelled { reason: GONE.into() },
                );
                continue;
            };
            let token = mint_id();
            let row = &mut self.outbox[i];
            row.event.lease_until = Some(until);
            row.event.attempts = row.event.attempts.saturating_add(1);
            row.token = Some(token.clone());
            out.push(OutboxLease {
                event: OutboxEvent {
                    data,
                    ..clone_bare(&row.event)
                },
                token,
            });
        }
        out
    }

    /// See `OutboxStore::settle_outbox`.
    pub(super) fn settle_outbox(&mut self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let Some(row) = self.outbox.iter_mut().find(|q| q.event.id == id) else {
            return Err(Error::NotFound(format!("outbox event {id} not found")));
        };
        if row.token.as_deref() != Some(token) {
            return Err(lease_lost(id));
        }
        row.token = None;
        apply_outcome(&mut row.event, outcome);
        Ok(())
    }

    /// See `OutboxStore::list_outbox`: each row with its payload (`null`
    /// when its snapshot was pruned before delivery).
    pub(super) fn list_outbox(&self, query: &OutboxQuery) -> Vec<OutboxEvent> {
        let mut out: Vec<&Queued> = self
            .outbox
            .iter()
            .map(|q| &**q)
            .filter(|q| query.matches(&q.event))
            .collect();
        out.sort_by_key(|q| q.event.due_at);
        out.into_iter()
            .skip(query.offset())
            .take(query.limit())
            .map(|q| self.whole(q))
            .collect()
    }

    /// See `OutboxStore::retry_outbox`: also re-enables the stopped
    /// endpoints the event was addressed to.
    pub(super) fn retry_outbox(&mut self, id: &str) -> Option<OutboxEvent> {
        let stopped: Vec<String> = self.stopped.iter().map(|s| s.channel.clone()).collect();
        let i = self.outbox.iter().position(|q| q.event.id == id)?;
        let row = &mut self.outbox[i];
        row.token = None;
        let enabled = apply_retry(&mut row.event, Utc::now(), &stopped);
        self.stopped.retain(|s| !enabled.contains(&s.channel));
        Some(self.whole(&self.outbox[i]))
    }
}

/// A copy of `event` without its data (which the caller replaces).
fn clone_bare(event: &OutboxEvent) -> OutboxEvent {
    OutboxEvent {
        id: event.id.clone(),
        kind: event.kind.clone(),
        timer: event.timer,
        snapshot_id: event.snapshot_id.clone(),
        session_id: event.session_id.clone(),
        agent: event.agent.clone(),
        data: Value::Null,
        created_at: event.created_at,
        due_at: event.due_at,
        state: event.state,
        attempts: event.attempts,
        last_error: event.last_error.clone(),
        lease_until: event.lease_until,
        done: event.done.clone(),
    }
}
