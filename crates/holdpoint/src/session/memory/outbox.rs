//! The in-memory store's outbox (docs/reference.md §11.3): claims by lease
//! and token, settles, retries and listings, under the store's lock.

use chrono::{DateTime, Utc};

use super::rows::Rows;
use crate::error::{Error, Result};
use crate::session::outbox::{
    OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, apply_outcome, apply_retry, lease_lost,
};
use crate::session::write::mint_id;

impl Rows {
    /// See `OutboxStore::claim_outbox`.
    pub(super) fn claim_outbox(
        &mut self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Vec<OutboxLease> {
        let mut due: Vec<usize> = (0..self.outbox.len())
            .filter(|&i| self.outbox[i].0.claimable(now))
            .collect();
        due.sort_by_key(|&i| self.outbox[i].0.due_at);
        due.truncate(limit);
        let until = crate::session::snapshot::lease_end(now, lease);
        let mut out = Vec::with_capacity(due.len());
        for i in due {
            let token = mint_id();
            let (event, held) = &mut self.outbox[i];
            event.lease_until = Some(until);
            event.attempts = event.attempts.saturating_add(1);
            *held = Some(token.clone());
            out.push(OutboxLease {
                event: event.clone(),
                token,
            });
        }
        out
    }

    /// See `OutboxStore::settle_outbox`.
    pub(super) fn settle_outbox(&mut self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let Some((event, held)) = self.outbox.iter_mut().find(|(e, _)| e.id == id) else {
            return Err(Error::NotFound(format!("outbox event {id} not found")));
        };
        if held.as_deref() != Some(token) {
            return Err(lease_lost(id));
        }
        *held = None;
        apply_outcome(event, outcome);
        Ok(())
    }

    /// See `OutboxStore::list_outbox`.
    pub(super) fn list_outbox(&self, query: &OutboxQuery) -> Vec<OutboxEvent> {
        let mut out: Vec<OutboxEvent> = self
            .outbox
            .iter()
            .map(|(e, _)| e)
            .filter(|e| query.matches(e))
            .cloned()
            .collect();
        out.sort_by_key(|e| e.due_at);
        out.into_iter().skip(query.offset()).take(query.limit()).collect()
    }

    /// See `OutboxStore::retry_outbox`: also re-enables the stopped
    /// endpoints the event was addressed to.
    pub(super) fn retry_outbox(&mut self, id: &str) -> Option<OutboxEvent> {
        let stopped: Vec<String> = self.stopped.iter().map(|s| s.channel.clone()).collect();
        let (event, held) = self.outbox.iter_mut().find(|(e, _)| e.id == id)?;
        *held = None;
        let enabled = apply_retry(event, Utc::now(), &stopped);
        let event = event.clone();
        self.stopped.retain(|s| !enabled.contains(&s.channel));
        Some(event)
    }
}
