//! Detached runs: the pending snapshot, its heartbeat, the abort watch and
//! the final write (docs/reference.md §6).

use std::sync::Arc;

use chrono::Utc;
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::AgentDef;
use super::load::Session;
use crate::error::{Error, ErrorBody, Result};
use crate::model::FinishReason;
use crate::session::{SessionState, SessionStore, Snapshot, SnapshotStatus};

/// Aborts a spawned task when dropped, so no task outlives its owner.
pub(crate) struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A run that went on in the background after a detach.
pub(crate) struct Detached {
    store: Arc<dyn SessionStore>,
    pub id: String,
    _heartbeat: AbortOnDrop<()>,
    _watch: AbortOnDrop<()>,
}

/// Writes the pending snapshot and starts the heartbeat and abort watch.
/// `abort` is set to `true` once an abort is requested on the row. A
/// resume's pending row is written under `successor` (the paused
/// snapshot's successor id), insert-if-absent, like its outcome would be.
pub(crate) async fn begin(
    def: &AgentDef,
    session: &Session,
    abort: watch::Sender<bool>,
    successor: Option<String>,
) -> Result<Detached> {
    let Some(store) = def.store.clone() else {
        return Err(Error::FailedPrecondition(format!(
            "agent \"{}\" cannot detach: detached runs need a session store (server-managed state)",
            def.name
        )));
    };
    let mut row = Snapshot::new(session.state.clone());
    row.parent_id = session.snapshot_id.clone();
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(row.created_at);
    row.agent = Some(def.name.clone());
    row.owner = session.owner.clone();
    let saved = match successor {
        Some(id) => store.insert_snapshot(&id, row).await?,
        None => store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await?
            .ok_or_else(|| Error::Internal("the pending snapshot was not written".into()))?,
    };
    let id = saved.snapshot_id;

    let beat_store = Arc::clone(&store);
    let beat_id = id.clone();
    let every = def.heartbeat;
    let heartbeat = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let result = beat_store
                .save_snapshot(
                    Some(&beat_id),
                    Box::new(|existing| {
                        Ok(existing.filter(|r| r.status == SnapshotStatus::Pending).map(|r| {
                            let mut next = r.clone();
                            next.heartbeat_at = Some(Utc::now());
                            next
                        }))
                    }),
                )
                .await;
            if let Err(e) = result {
                tracing::warn!(snapshot_id = %beat_id, error = %e, "heartbeat write failed");
            }
        }
    });

    let mut statuses = store.watch_status(&id).await?;
    let watch = tokio::spawn(async move {
        while let Some(status) = statuses.next().await {
            if matches!(status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                abort.send_replace(true);
                break;
            }
        }
    });

    Ok(Detached {
        store,
        id,
        _heartbeat: AbortOnDrop(heartbeat),
        _watch: AbortOnDrop(watch),
    })
}

impl Detached {
    /// Settles the pending row. An abort requested before this write wins:
    /// the row ends `aborted` (keeping `state`).
    pub async fn finalize(
        &self,
        status: SnapshotStatus,
        state: SessionState,
        finish_reason: FinishReason,
        error: Option<ErrorBody>,
    ) {
        let result = self
            .store
            .save_snapshot(
                Some(&self.id),
                Box::new(move |existing| {
                    // Only the run's own pending row: once settled by an
                    // operator (the run had died, or seemed to), it is not
                    // this run's to write.
                    let Some(row) =
                        existing.filter(|r| matches!(r.status, SnapshotStatus::Pending | SnapshotStatus::Aborting))
                    else {
                        return Ok(None);
                    };
                    let mut next = row.clone();
                    let now = Utc::now();
                    next.updated_at = now;
                    next.heartbeat_at = Some(now);
                    next.state = Some(state);
                    if matches!(row.status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                        next.status = SnapshotStatus::Aborted;
                        next.finish_reason = Some(FinishReason::Aborted);
                        next.error = None;
                    } else {
                        next.status = status;
                        next.finish_reason = Some(finish_reason);
                        next.error = error;
                    }
                    Ok(Some(next))
                }),
            )
            .await;
        if let Err(e) = result {
            tracing::error!(snapshot_id = %self.id, error = %e, "could not settle a detached run; it will read as expired");
        }
    }
}
