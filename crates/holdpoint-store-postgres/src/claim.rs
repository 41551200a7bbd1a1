//! A claim of a resume: the steps of [`holdpoint_store_sql::claim`]'s
//! algorithm on PostgreSQL, and the SQL they run.
//!
//! The first claim in place goes through the group commit ([`crate::group`]):
//! the batch's one statement runs `holdpoint_claim` (migration 3, whose
//! loop body is [`IN_PLACE`]), which appends the claim's members to the
//! stored document in SQL, and writes each claim that took with its audit
//! and outbox rows. When it did not take, [`CLAIMED`] tells why (a missing
//! row, a claimed one, or an unclaimed one whose document names a claim
//! key, which the algorithm then claims whole). The general path runs in a
//! transaction of its own, opened by its first write ([`save_in`] locks the
//! row) and committed once the algorithm succeeded; dropped (rolled back)
//! otherwise.

use std::sync::Arc;

use holdpoint::Result;
use holdpoint::session::outbox::{OutboxWrites, decided_events};
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate};
use holdpoint_store_sql::claim::{self, ClaimTx, FirstClaim, InPlace};
use holdpoint_store_sql::outbox::OutboxColumns;
use holdpoint_store_sql::row::AuditColumns;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::error::store_error;
use crate::group::{Committer, Op};
use crate::outbox;
use crate::write::{insert_audit_rows, save_in};

/// The claim of one row of a group-commit batch, as the body of
/// `holdpoint_claim` (migration 3) runs it for the batch's `i`th claim: the
/// members are appended in SQL, and the document test of
/// [`with_claim_members`](holdpoint_store_sql::claim::with_claim_members)
/// is repeated as `strpos` terms. The migration that defines the function
/// is checked to carry exactly this statement (`schema.rs`).
#[allow(
    dead_code,
    reason = "run by the migration's function; the migration is checked against it"
)]
pub(crate) const IN_PLACE: &str = "UPDATE holdpoint_snapshots \
       SET resumed_at_ns = p_at_ns[i], \
           data = (left(data::text, -1) || ',' || p_members[i] || '}')::json \
     WHERE snapshot_id = p_ids[i] AND resumed_at_ns IS NULL \
       AND strpos(data::text, '\"resumedAt\"') = 0 \
       AND strpos(data::text, '\"resumeLeaseUntil\"') = 0";

/// After a claim of row `$1` in place did not take: whether the row was
/// claimed before (no row: it is missing).
const CLAIMED: &str = "SELECT resumed_at_ns IS NOT NULL FROM holdpoint_snapshots WHERE snapshot_id = $1";

/// Claims `claim` with its audit `records`, all or nothing (see the module
/// doc).
pub(crate) async fn claim(
    committer: &Committer,
    pool: &PgPool,
    claim: ResumeClaim,
    records: &[AuditRecord],
    writes: OutboxWrites,
) -> Result<()> {
    let what = format!("claim snapshot {}", claim.snapshot_id);
    let events = outbox::columns(&decided_events(&claim.snapshot_id, claim.lease_until, records), writes)?;
    let mut steps = Steps {
        committer,
        pool,
        tx: None,
        writes,
    };
    claim::claim(&mut steps, claim, records, events).await?;
    if let Some(tx) = steps.tx {
        tx.commit().await.map_err(|e| store_error(&what, e))?;
    }
    Ok(())
}

/// The claim's steps: the group commit and the pool for the first claim in
/// place, and the general path's transaction once a step opened it.
struct Steps<'a> {
    committer: &'a Committer,
    pool: &'a PgPool,
    tx: Option<Transaction<'static, Postgres>>,
    /// Which outbox rows the general path's save writes.
    writes: OutboxWrites,
}

impl Steps<'_> {
    /// The general path's transaction, opened by its first step.
    async fn tx(&mut self) -> Result<&mut PgConnection> {
        let tx = match self.tx.take() {
            Some(tx) => tx,
            None => self
                .pool
                .begin()
                .await
                .map_err(|e| store_error("begin a claim's transaction", e))?,
        };
        Ok(&mut **self.tx.insert(tx))
    }
}

impl ClaimTx for Steps<'_> {
    type Error = holdpoint::Error;

    async fn claim_in_place(&mut self, first: &Arc<FirstClaim>) -> Result<InPlace> {
        if self.committer.write(Op::Claim(Arc::clone(first))).await? {
            return Ok(InPlace::Taken);
        }
        let claimed: Option<bool> = sqlx::query_scalar(CLAIMED)
            .bind(&first.id)
            .fetch_optional(self.pool)
            .await
            .map_err(|e| store_error(&format!("claim snapshot {}", first.id), e))?;
        Ok(match claimed {
            Some(true) => InPlace::Claimed,
            Some(false) => InPlace::Whole,
            None => InPlace::Missing,
        })
    }

    async fn save(&mut self, id: &str, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let writes = self.writes;
        save_in(self.tx().await?, id, update, writes).await
    }

    async fn append_audit(&mut self, rows: &[AuditColumns]) -> Result<()> {
        insert_audit_rows(self.tx().await?, rows).await
    }

    async fn append_outbox(&mut self, rows: &[OutboxColumns]) -> Result<()> {
        outbox::insert(self.tx().await?, rows).await
    }
}
