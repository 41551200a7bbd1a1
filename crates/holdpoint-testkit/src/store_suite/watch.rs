//! `SessionStore::watch_status`: current value first, then changes.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::session::{SessionStore, SnapshotStatus};

use super::{fresh_id, fresh_session, put, snapshot};
use holdpoint::session::SessionStoreExt;

/// How long a watcher may take to report a change. Stores that poll for
/// changes made by other handles must do so more often than this.
const REPORT_WITHIN: Duration = Duration::from_secs(10);

async fn next_status(stream: &mut BoxStream<'static, SnapshotStatus>) -> Option<SnapshotStatus> {
    tokio::time::timeout(REPORT_WITHIN, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no status reported within {REPORT_WITHIN:?}"))
}

/// Waits until the watcher reports `wanted`, checking that every status
/// seen on the way is in `allowed` (changes may be coalesced, never invented).
pub(super) async fn wait_for(
    stream: &mut BoxStream<'static, SnapshotStatus>,
    wanted: SnapshotStatus,
    allowed: &[SnapshotStatus],
) {
    loop {
        match next_status(stream).await {
            Some(status) if status == wanted => return,
            Some(status) => assert!(
                allowed.contains(&status),
                "unexpected status {status:?} while waiting for {wanted:?}"
            ),
            None => panic!("the watch ended before reporting {wanted:?}"),
        }
    }
}

async fn set_status(store: &dyn SessionStore, id: &str, status: SnapshotStatus) {
    store
        .save_snapshot(
            Some(id),
            Box::new(move |existing| {
                let mut next = existing.cloned().expect("row");
                next.status = status;
                next.updated_at = Utc::now();
                Ok(Some(next))
            }),
        )
        .await
        .expect("status write failed");
}

/// The first item is the row's status now.
pub async fn watch_starts_with_current_value(store: Arc<dyn SessionStore>) {
    for status in [
        SnapshotStatus::Completed,
        SnapshotStatus::Failed,
        SnapshotStatus::Pending,
    ] {
        let mut row = snapshot(&fresh_session());
        row.status = status;
        row.heartbeat_at = Some(Utc::now());
        let id = put(&*store, None, row).await.snapshot_id;
        let mut stream = store.watch_status(&id).await.expect("watch failed");
        assert_eq!(next_status(&mut stream).await, Some(status));
    }
}

/// Changes arrive in order; quick successive changes may be coalesced,
/// but the last one always arrives.
pub async fn watch_reports_changes(store: Arc<dyn SessionStore>) {
    let mut row = snapshot(&fresh_session());
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now());
    let id = put(&*store, None, row).await.snapshot_id;
    let mut stream = store.watch_status(&id).await.expect("watch failed");
    assert_eq!(next_status(&mut stream).await, Some(SnapshotStatus::Pending));

    store.abort(&id).await.expect("abort failed");
    wait_for(&mut stream, SnapshotStatus::Aborting, &[SnapshotStatus::Pending]).await;

    // Two writes in a row: the watcher may see both or only the last.
    set_status(&*store, &id, SnapshotStatus::Failed).await;
    set_status(&*store, &id, SnapshotStatus::Aborted).await;
    wait_for(
        &mut stream,
        SnapshotStatus::Aborted,
        &[SnapshotStatus::Aborting, SnapshotStatus::Failed],
    )
    .await;

    // A second watcher on the same row starts from the current value.
    let mut second = store.watch_status(&id).await.expect("watch failed");
    assert_eq!(next_status(&mut second).await, Some(SnapshotStatus::Aborted));
}

/// Watching an unknown id gives a stream that ends at once.
pub async fn watch_ends_for_missing_id(store: Arc<dyn SessionStore>) {
    let mut stream = store
        .watch_status(&fresh_id("watch-missing"))
        .await
        .expect("watch failed");
    assert_eq!(
        next_status(&mut stream).await,
        None,
        "a watch of a missing id should end"
    );
}

/// Dropping a watcher stops it without disturbing the store: later writes
/// succeed and later watchers work.
pub async fn watch_stops_when_dropped(store: Arc<dyn SessionStore>) {
    let mut row = snapshot(&fresh_session());
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now());
    let id = put(&*store, None, row).await.snapshot_id;
    for _ in 0..3 {
        let mut stream = store.watch_status(&id).await.expect("watch failed");
        assert_eq!(next_status(&mut stream).await, Some(SnapshotStatus::Pending));
        drop(stream);
    }
    // Let any per-watch machinery notice the drops.
    tokio::time::sleep(Duration::from_millis(300)).await;
    set_status(&*store, &id, SnapshotStatus::Completed).await;
    let mut stream = store.watch_status(&id).await.expect("watch failed");
    assert_eq!(next_status(&mut stream).await, Some(SnapshotStatus::Completed));
    let dropped_early = store.watch_status(&id).await.expect("watch failed");
    drop(dropped_early);
    set_status(&*store, &id, SnapshotStatus::Failed).await;
    wait_for(&mut stream, SnapshotStatus::Failed, &[SnapshotStatus::Completed]).await;
}
