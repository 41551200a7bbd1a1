//! Following a detached run: waiting, bounded, until its snapshot settles
//! (Genkit's `waitForSnapshot`; docs/reference.md §6.5).

use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;

use super::{Access, Agent};
use crate::error::Result;
use crate::session::{Snapshot, SnapshotStatus};

/// Whether a reader sees `snapshot` settled: anything but `pending` and
/// `aborting` (an expired row counts, since nothing will finish it).
fn settled(snapshot: &Snapshot) -> bool {
    !matches!(
        snapshot.read_status(Utc::now()),
        SnapshotStatus::Pending | SnapshotStatus::Aborting
    )
}

impl Agent {
    /// Waits until the snapshot leaves `pending` and `aborting`, for at
    /// most `max_wait`, and returns it as it then reads: settled
    /// (`completed`, `failed`, `aborted`, or `expired` when its worker
    /// died), or still `pending`/`aborting` when the wait ran out. A
    /// settled snapshot returns at once. `None` as for
    /// [`snapshot`](Self::snapshot): an unknown id, another agent's row,
    /// another principal's under [`Access::As`]. `access` is an [`Access`]
    /// or a `&`[`Caller`](super::Caller).
    ///
    /// Fails with `FAILED_PRECONDITION` on an agent without a store.
    pub async fn wait_for_snapshot<'a>(
        &self,
        snapshot_id: &str,
        access: impl Into<Access<'a>>,
        max_wait: Duration,
    ) -> Result<Option<Snapshot>> {
        let access = access.into();
        let Some(first) = self.snapshot(snapshot_id, access).await? else {
            return Ok(None);
        };
        if settled(&first) {
            return Ok(Some(first));
        }
        let mut statuses = self.require_store()?.watch_status(snapshot_id).await?;
        let until_settled = async {
            while let Some(status) = statuses.next().await {
                if !matches!(status, SnapshotStatus::Pending | SnapshotStatus::Aborting) {
                    break;
                }
            }
        };
        // Running out of time is an answer too: the row as it then reads.
        let _ = tokio::time::timeout(max_wait, until_settled).await;
        self.snapshot(snapshot_id, access).await
    }
}
