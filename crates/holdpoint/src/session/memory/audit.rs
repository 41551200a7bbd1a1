//! The in-memory store's audit log: the records in the order written,
//! kept in the batches they were written with, so the outbox rows of a
//! claim share its records instead of copying them.

use std::sync::Arc;

use crate::session::audit::AuditRecord;

/// The audit records, oldest batch first.
#[derive(Default)]
pub(super) struct AuditLog {
    batches: Vec<Arc<[AuditRecord]>>,
}

impl AuditLog {
    /// Appends a batch written together (an empty one is not kept).
    pub(super) fn push(&mut self, batch: Arc<[AuditRecord]>) {
        if !batch.is_empty() {
            self.batches.push(batch);
        }
    }

    /// Appends records written together.
    pub(super) fn extend(&mut self, records: Vec<AuditRecord>) {
        if !records.is_empty() {
            self.batches.push(records.into());
        }
    }

    /// Every record, newest first.
    pub(super) fn newest_first(&self) -> impl Iterator<Item = &AuditRecord> {
        self.batches.iter().rev().flat_map(|b| b.iter().rev())
    }

    /// How many records `doomed` picks.
    pub(super) fn count(&self, doomed: impl Fn(&AuditRecord) -> bool) -> usize {
        self.batches.iter().flat_map(|b| b.iter()).filter(|r| doomed(r)).count()
    }

    /// Deletes the records `doomed` picks; returns how many. A batch that
    /// loses some records is copied without them (outbox rows built from
    /// it keep the batch as it was).
    pub(super) fn remove(&mut self, doomed: impl Fn(&AuditRecord) -> bool) -> usize {
        let mut removed = 0;
        self.batches.retain_mut(|batch| {
            let gone = batch.iter().filter(|r| doomed(r)).count();
            if gone == 0 {
                return true;
            }
            removed += gone;
            if gone == batch.len() {
                return false;
            }
            *batch = batch.iter().filter(|r| !doomed(r)).cloned().collect();
            true
        });
        removed
    }
}
