//! A claim of a resume inside the batch's transaction: the steps of
//! [`holdpoint_store_sql::claim`]'s algorithm on the writer's connection.
//!
//! The first claim in place reads the row, refuses a missing or claimed
//! one, and appends the claim to its stored document without decoding it
//! ([`with_claim_members`]): the decode and re-encode of the paused row
//! that the general path ([`save`]) pays are saved on every resume. Every
//! step is synchronous (rusqlite), so the algorithm, written with `async`
//! steps for PostgreSQL's sake, finishes in the one poll [`run`] gives it.

use std::sync::Arc;

use futures::FutureExt;
use holdpoint::Error;
use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate};
use holdpoint_store_sql::claim::{self, ClaimTx, FirstClaim, InPlace, with_claim_members};
use holdpoint_store_sql::outbox::OutboxColumns;
use holdpoint_store_sql::row::AuditColumns;
use rusqlite::Connection;

use super::apply::{Fail, save};
use crate::error::store_error;
use crate::{outbox, write};

/// The claim's steps on the writer's connection, inside the batch's
/// transaction. A refusal fails only the claim's caller, a statement that
/// fails the whole batch (see [`Fail`]).
struct Steps<'c>(&'c Connection, OutboxWrites);

/// Claims `claim` with its audit `records` and outbox `events`, all or
/// nothing, inside the batch's transaction on `conn`.
pub(super) fn run(
    conn: &Connection,
    claim: ResumeClaim,
    records: &[AuditRecord],
    events: Vec<OutboxColumns>,
    writes: OutboxWrites,
) -> std::result::Result<(), Fail> {
    claim::claim(&mut Steps(conn, writes), claim, records, events)
        .now_or_never()
        // Unreachable: no step of `Steps` ever waits.
        .unwrap_or_else(|| Err(Fail::Batch(Error::Internal("sqlite store: a claim step waited".into()))))
}

impl ClaimTx for Steps<'_> {
    type Error = Fail;

    async fn claim_in_place(&mut self, first: &Arc<FirstClaim>) -> std::result::Result<InPlace, Fail> {
        let (conn, id) = (self.0, &first.id);
        let what = || format!("claim snapshot {id}");
        let Some(stored) = write::stored(conn, id).map_err(|e| Fail::Batch(store_error(&what(), e)))? else {
            return Ok(InPlace::Missing);
        };
        if stored.resumed_at_ns.is_some() {
            return Ok(InPlace::Claimed);
        }
        let Some(data) = with_claim_members(&stored.data, &first.members) else {
            return Ok(InPlace::Whole);
        };
        if !write::claim(conn, id, &data, first.at_ns).map_err(|e| Fail::Batch(store_error(&what(), e)))? {
            return Ok(InPlace::Claimed);
        }
        self.append_audit(&first.audit).await?;
        self.append_outbox(&first.events).await?;
        Ok(InPlace::Taken)
    }

    async fn save(&mut self, id: &str, update: SnapshotUpdate) -> std::result::Result<Option<Snapshot>, Fail> {
        save(self.0, id, update, &[], self.1)
    }

    async fn append_audit(&mut self, rows: &[AuditColumns]) -> std::result::Result<(), Fail> {
        write::audit(self.0, rows).map_err(|e| Fail::Batch(store_error("append audit records", e)))
    }

    async fn append_outbox(&mut self, rows: &[OutboxColumns]) -> std::result::Result<(), Fail> {
        outbox::insert(self.0, rows).map_err(|e| Fail::Batch(store_error("append outbox events", e)))
    }
}
