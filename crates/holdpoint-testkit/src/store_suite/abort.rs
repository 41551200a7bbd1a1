//! `SessionStoreExt::abort`: pending rows become `aborting`, others stay.

use std::sync::Arc;

use chrono::{Duration, Utc};
use holdpoint::session::{SessionStore, SnapshotStatus};

use super::{fresh_id, fresh_session, get_present, put, snapshot};
use holdpoint::session::SessionStoreExt;

/// Abort on a pending row returns `Some(Pending)` and marks it `aborting`;
/// a second abort returns `Some(Aborting)` and changes nothing.
pub async fn abort_pending_requests_abort(store: Arc<dyn SessionStore>) {
    let mut row = snapshot(&fresh_session());
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now());
    let id = put(&*store, None, row).await.snapshot_id;

    let previous = store.abort(&id).await.expect("abort failed");
    assert_eq!(previous, Some(SnapshotStatus::Pending));
    let aborting = get_present(&*store, &id).await;
    assert_eq!(aborting.status, SnapshotStatus::Aborting);

    let again = store.abort(&id).await.expect("second abort failed");
    assert_eq!(again, Some(SnapshotStatus::Aborting));
    assert_eq!(
        get_present(&*store, &id).await,
        aborting,
        "a second abort changed the row"
    );
}

/// Abort on a settled row returns its status and leaves it as it was.
pub async fn abort_terminal_is_unchanged(store: Arc<dyn SessionStore>) {
    for status in [
        SnapshotStatus::Completed,
        SnapshotStatus::Failed,
        SnapshotStatus::Aborted,
    ] {
        let mut row = snapshot(&fresh_session());
        row.status = status;
        row.updated_at = Utc::now() - Duration::seconds(5);
        let id = put(&*store, None, row).await.snapshot_id;
        let before = get_present(&*store, &id).await;
        let previous = store.abort(&id).await.expect("abort failed");
        assert_eq!(previous, Some(status));
        assert_eq!(
            get_present(&*store, &id).await,
            before,
            "abort changed a {status:?} row"
        );
    }
}

/// Abort on an unknown id returns `None` and creates nothing.
pub async fn abort_missing_is_none(store: Arc<dyn SessionStore>) {
    let id = fresh_id("abort-missing");
    assert_eq!(store.abort(&id).await.expect("abort failed"), None);
    assert!(store.get_snapshot(&id).await.expect("get failed").is_none());
}
