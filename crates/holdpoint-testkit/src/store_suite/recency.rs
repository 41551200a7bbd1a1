//! Which row is a session's latest, and how a stale pending row reads.

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use holdpoint::session::{SessionStore, SnapshotStatus};

use super::{fresh_id, fresh_session, get_present, put, snapshot};

async fn latest_id(store: &dyn SessionStore, session: &str) -> String {
    store
        .get_latest_snapshot(session)
        .await
        .expect("get_latest_snapshot failed")
        .unwrap_or_else(|| panic!("session {session} should have a latest snapshot"))
        .snapshot_id
}

/// The latest snapshot has the greatest `createdAt`, whatever the write
/// order, the status, or other sessions' rows.
pub async fn latest_by_created_at(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let base = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid time");
    let mut ids = Vec::new();
    // Written out of order: the middle one (offset 2 s) carries a status
    // other than completed, to show any status counts.
    for (offset, status) in [
        (0, SnapshotStatus::Completed),
        (2, SnapshotStatus::Failed),
        (1, SnapshotStatus::Completed),
    ] {
        let mut row = snapshot(&session);
        row.created_at = base + Duration::seconds(offset);
        row.updated_at = row.created_at;
        row.status = status;
        ids.push(put(&*store, None, row).await.snapshot_id);
    }
    // A later row in another session does not count.
    let mut other = snapshot(&fresh_session());
    other.created_at = base + Duration::seconds(10);
    put(&*store, None, other).await;
    assert_eq!(latest_id(&*store, &session).await, ids[1]);

    // Nanoseconds count too.
    let mut row = snapshot(&session);
    row.created_at = base + Duration::seconds(2) + Duration::nanoseconds(1);
    let newest = put(&*store, None, row).await.snapshot_id;
    assert_eq!(latest_id(&*store, &session).await, newest);
}

/// Equal `createdAt`: the greatest snapshot id wins, whatever the write order.
pub async fn latest_ties_by_snapshot_id(store: Arc<dyn SessionStore>) {
    let at = Utc.timestamp_opt(1_700_000_000, 500).single().expect("valid time");
    for order in [["tie-a", "tie-b"], ["tie-b", "tie-a"]] {
        let session = fresh_session();
        let suffix = fresh_id("");
        for tag in order {
            let mut row = snapshot(&session);
            row.created_at = at;
            row.updated_at = at;
            put(&*store, Some(&format!("{tag}{suffix}")), row).await;
        }
        assert_eq!(
            latest_id(&*store, &session).await,
            format!("tie-b{suffix}"),
            "order {order:?}"
        );
    }
}

/// A heartbeat (a newer `heartbeatAt` and `updatedAt`) on an older row
/// does not make it the latest.
pub async fn heartbeat_does_not_move_recency(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let now = Utc::now();
    let mut older = snapshot(&session);
    older.created_at = now - Duration::seconds(20);
    older.updated_at = older.created_at;
    older.status = SnapshotStatus::Pending;
    older.heartbeat_at = Some(older.created_at);
    let older_id = put(&*store, None, older).await.snapshot_id;
    let mut newer = snapshot(&session);
    newer.created_at = now - Duration::seconds(10);
    newer.updated_at = newer.created_at;
    let newer_id = put(&*store, None, newer).await.snapshot_id;
    assert_eq!(latest_id(&*store, &session).await, newer_id);

    let beat = Utc::now();
    store
        .save_snapshot(
            Some(&older_id),
            Box::new(move |existing| {
                let mut next = existing.cloned().expect("row");
                next.heartbeat_at = Some(beat);
                next.updated_at = beat;
                Ok(Some(next))
            }),
        )
        .await
        .expect("heartbeat failed");
    assert_eq!(get_present(&*store, &older_id).await.heartbeat_at, Some(beat));
    assert_eq!(
        latest_id(&*store, &session).await,
        newer_id,
        "a heartbeat moved recency"
    );
}

/// A pending row whose heartbeat is over 60 s old reads as `expired` (from
/// `get_snapshot` and `get_latest_snapshot`); a fresh one reads `pending`;
/// writing an expired row back stores it as `pending`.
pub async fn stale_pending_reads_expired(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let mut row = snapshot(&session);
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now() - Duration::seconds(61));
    let id = put(&*store, None, row).await.snapshot_id;
    assert_eq!(get_present(&*store, &id).await.status, SnapshotStatus::Expired);
    let latest = store
        .get_latest_snapshot(&session)
        .await
        .expect("latest failed")
        .expect("latest");
    assert_eq!(latest.status, SnapshotStatus::Expired);

    // Without a heartbeat, updatedAt is the last sign of life.
    let mut row = snapshot(&session);
    row.status = SnapshotStatus::Pending;
    row.updated_at = Utc::now() - Duration::seconds(120);
    let quiet = put(&*store, None, row).await.snapshot_id;
    assert_eq!(get_present(&*store, &quiet).await.status, SnapshotStatus::Expired);

    let mut row = snapshot(&session);
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now());
    let fresh = put(&*store, None, row).await.snapshot_id;
    assert_eq!(get_present(&*store, &fresh).await.status, SnapshotStatus::Pending);

    // What was read as expired is written back as pending (with a new beat).
    let expired = get_present(&*store, &id).await;
    let mut revived = expired.clone();
    revived.heartbeat_at = Some(Utc::now());
    put(&*store, Some(&id), revived).await;
    assert_eq!(get_present(&*store, &id).await.status, SnapshotStatus::Pending);
}
