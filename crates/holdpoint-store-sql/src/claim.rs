//! The claim of a resume in the SQL stores, written once over [`ClaimTx`],
//! the few steps each driver implements on its transaction (the SQL of
//! each step is the driver's own):
//!
//! 1. A first claim (not a takeover) is tried in place
//!    ([`ClaimTx::claim_in_place`]): the row is claimed only while
//!    `resumed_at_ns` is unset (never claimed), and only when its stored
//!    document names neither claim key; the claim then sets
//!    `resumed_at_ns` and appends `"resumedAt"` and `"resumeLeaseUntil"`
//!    ([`claim_members`]) to the document without decoding it, and writes
//!    the claim's audit rows and outbox rows with it.
//! 2. A row claimed before is `ABORTED` ("already resumed"), a missing one
//!    `NOT_FOUND`; nothing is written.
//! 3. Otherwise (a takeover of a lapsed claim, or an unclaimed row whose
//!    document names a claim key) the general path: the row read, decoded,
//!    [`claim_update`] run on it (its checks are
//!    [`apply_claim`](holdpoint::session::apply_claim)'s) and written back
//!    whole ([`ClaimTx::save`]); then the audit rows
//!    ([`ClaimTx::append_audit`]) and the outbox rows
//!    ([`ClaimTx::append_outbox`]), in the general path's one transaction.
//!
//! Transactions are the driver's: SQLite runs every step inside its
//! group-commit batch's transaction. PostgreSQL's step 1 is its group
//! commit (one statement for a batch of claims, so one implicit
//! transaction that writes each claim with its audit and outbox rows, or
//! nothing of it), and the general path runs in a transaction of its own,
//! opened at its first write and committed once [`claim`] returned `Ok`.
//!
//! The steps are `async fn`s: PostgreSQL's await the server; SQLite's never
//! wait (rusqlite is synchronous and runs on the writer's thread), so its
//! writer polls [`claim`] once, to completion.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate, claim_update};
use holdpoint::{Error, Result};

use crate::outbox::OutboxColumns;
use crate::row::AuditColumns;

/// A claim encoded once, before anything is written: what a first claim
/// in place writes, and the records the general path writes after the row.
pub struct FirstClaim {
    /// The claimed row.
    pub id: String,
    /// `resumed_at_ns`: when the claim was made.
    pub at_ns: i64,
    /// The members appended to the stored document ([`claim_members`]).
    pub members: String,
    /// The claim's audit rows, written only when the claim takes.
    pub audit: Vec<AuditColumns>,
    /// The claim's outbox rows, written only when the claim takes.
    pub events: Vec<OutboxColumns>,
}

impl FirstClaim {
    /// `claim` encoded with its audit `records` and outbox `events`; fails
    /// (writing nothing) when any of them does not encode.
    pub fn new(claim: &ResumeClaim, records: &[AuditRecord], events: Vec<OutboxColumns>) -> Result<Self> {
        let now = Utc::now();
        let at_ns = now
            .timestamp_nanos_opt()
            .ok_or_else(|| Error::Internal(format!("the time {now} is outside the range a store can keep")))?;
        Ok(FirstClaim {
            id: claim.snapshot_id.clone(),
            at_ns,
            members: claim_members(now, claim.lease_until)?,
            audit: records.iter().map(AuditColumns::of).collect::<Result<_>>()?,
            events,
        })
    }
}

/// What a first claim in place found ([`ClaimTx::claim_in_place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// The row is claimed, with the claim's audit and outbox rows.
    Taken,
    /// The row was claimed before: nothing written.
    Claimed,
    /// No row has the id: nothing written.
    Missing,
    /// The row is unclaimed but its document cannot take the members as
    /// it is ([`with_claim_members`] is `None`): nothing written, and the
    /// row is claimed whole.
    Whole,
}

/// The steps of a claim that a SQL store runs on its transaction (see the
/// module doc for the order [`claim`] runs them in). A step's error is the
/// driver's own, so that it can tell a failure of the database from a
/// refusal of this claim ([`Error`], converted with `From`): SQLite fails a
/// whole batch for the first and only the claim's caller for the second.
// The steps are not `Send` in general: SQLite's hold a `&Connection`
// (not `Sync`) and are polled on its writer's thread. PostgreSQL's are,
// and its caller, naming the type, sees that.
#[allow(async_fn_in_trait)]
pub trait ClaimTx {
    /// A failed step; a refusal of the claim converts into it.
    type Error: From<Error>;

    /// Claims row `first.id` in place if it was never claimed and its
    /// document can take `first.members` as it is, writing `first.audit`
    /// and `first.events` with it; otherwise writes nothing and says why.
    /// (The `Arc` lets a driver hand the claim to a batch of its own.)
    async fn claim_in_place(&mut self, first: &Arc<FirstClaim>) -> std::result::Result<InPlace, Self::Error>;

    /// Reads row `id` (locked against other writers until the transaction
    /// ends), runs `update` on it as decoded and writes the row it returns
    /// whole, with the outbox rows of a hold it creates; writes nothing when
    /// the update fails.
    async fn save(&mut self, id: &str, update: SnapshotUpdate) -> std::result::Result<Option<Snapshot>, Self::Error>;

    /// Appends audit rows, in order.
    async fn append_audit(&mut self, rows: &[AuditColumns]) -> std::result::Result<(), Self::Error>;

    /// Appends outbox rows, in order.
    async fn append_outbox(&mut self, rows: &[OutboxColumns]) -> std::result::Result<(), Self::Error>;
}

/// Claims `claim.snapshot_id` for a resume with its audit `records` and
/// outbox `events` (those of the decisions), all or nothing, on `tx` (see
/// the module doc). Fails with `NOT_FOUND` for a missing row, `ABORTED`
/// when a first claim finds the row claimed, and as
/// [`apply_claim`](holdpoint::session::apply_claim) says for a takeover.
pub async fn claim<T: ClaimTx>(
    tx: &mut T,
    claim: ResumeClaim,
    records: &[AuditRecord],
    events: Vec<OutboxColumns>,
) -> std::result::Result<(), T::Error> {
    let first = Arc::new(FirstClaim::new(&claim, records, events)?);
    if !claim.takeover {
        match tx.claim_in_place(&first).await? {
            InPlace::Taken => return Ok(()),
            InPlace::Claimed => return Err(Error::AlreadyResumed(claim.snapshot_id).into()),
            InPlace::Missing => {
                return Err(Error::NotFound(format!("snapshot {} not found", claim.snapshot_id)).into());
            }
            InPlace::Whole => {}
        }
    }
    let id = claim.snapshot_id.clone();
    tx.save(&id, claim_update(claim)).await?;
    tx.append_audit(&first.audit).await?;
    tx.append_outbox(&first.events).await
}

/// The members a first claim adds to a stored document,
/// `"resumedAt":…,"resumeLeaseUntil":…` (no braces), the times written as
/// the row's encoder writes them.
pub fn claim_members(at: DateTime<Utc>, lease_until: DateTime<Utc>) -> Result<String> {
    let json =
        |t: &DateTime<Utc>| serde_json::to_string(t).map_err(|e| Error::Internal(format!("encode a claim time: {e}")));
    Ok(format!(
        "\"resumedAt\":{},\"resumeLeaseUntil\":{}",
        json(&at)?,
        json(&lease_until)?
    ))
}

/// The stored document `data` with a first claim's `members` (see
/// [`claim_members`]) appended, without decoding it; `None` when it cannot
/// take them as they are: not an object ending in `}`, or already naming
/// either claim key (the result would repeat a key), and the row is to be
/// claimed whole.
pub fn with_claim_members(data: &str, members: &str) -> Option<String> {
    let body = data.trim_end().strip_suffix('}')?;
    let body = body.trim_end();
    if !data.trim_start().starts_with('{')
        || body.ends_with('{')
        || data.contains("\"resumedAt\"")
        || data.contains("\"resumeLeaseUntil\"")
    {
        return None;
    }
    let mut out = String::with_capacity(body.len() + members.len() + 2);
    out.push_str(body);
    out.push(',');
    out.push_str(members);
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests;
