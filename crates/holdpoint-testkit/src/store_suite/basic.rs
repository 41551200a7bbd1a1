//! Reads and writes of single rows: ids, copies, defaults, skipped and
//! failed writes, timestamps and session-id rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Duration, TimeZone, Utc};
use holdpoint::session::{SessionStore, Snapshot, SnapshotStatus};
use holdpoint::{Error, Status};
use serde_json::json;

use super::{fresh_id, fresh_session, get, get_present, put, save, snapshot};

/// Unknown snapshot and session ids read as `None`.
pub async fn get_missing_is_none(store: Arc<dyn SessionStore>) {
    assert!(get(&*store, &fresh_id("missing")).await.is_none());
    let latest = store
        .get_latest_snapshot(&fresh_session())
        .await
        .expect("get_latest_snapshot failed");
    assert!(latest.is_none(), "latest of an unknown session should be None");
}

/// A caller-chosen id is kept, the update sees no row the first time and
/// the written row the second time.
pub async fn fixed_id_is_kept(store: Arc<dyn SessionStore>) {
    let id = fresh_id("fixed");
    let session = fresh_session();
    let row = snapshot(&session);
    let saw_none = Arc::new(AtomicBool::new(false));
    let seen = saw_none.clone();
    let saved = save(
        &*store,
        Some(&id),
        Box::new(move |existing| {
            seen.store(existing.is_none(), Ordering::SeqCst);
            Ok(Some(row))
        }),
    )
    .await
    .expect("save failed")
    .expect("nothing written");
    assert!(saw_none.load(Ordering::SeqCst), "a new id should give the update None");
    assert_eq!(saved.snapshot_id, id);
    let read = get_present(&*store, &id).await;
    assert_eq!(read.snapshot_id, id);
    assert_eq!(read.session_id, session);
    assert_eq!(read, saved);

    let expected = read.clone();
    let again = save(
        &*store,
        Some(&id),
        Box::new(move |existing| {
            assert_eq!(existing, Some(&expected), "the update should see the stored row");
            Ok(existing.cloned())
        }),
    )
    .await
    .expect("second save failed");
    assert_eq!(again.map(|s| s.snapshot_id), Some(id));
}

/// With no id, or an empty one, the store mints a fresh id; the row's own
/// `snapshotId` field is replaced by it.
pub async fn id_is_minted_when_absent(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let mut row = snapshot(&session);
    row.snapshot_id = "ignored-by-store".into();
    let first = put(&*store, None, row.clone()).await;
    let second = put(&*store, Some(""), row).await;
    for saved in [&first, &second] {
        assert!(!saved.snapshot_id.is_empty(), "a minted id must not be empty");
        assert_ne!(saved.snapshot_id, "ignored-by-store");
        assert_eq!(
            get_present(&*store, &saved.snapshot_id).await.snapshot_id,
            saved.snapshot_id
        );
    }
    assert_ne!(first.snapshot_id, second.snapshot_id, "minted ids must differ");
}

/// Values handed out are copies: changing them changes nothing stored.
pub async fn reads_are_copies(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let mut row = snapshot(&session);
    if let Some(state) = row.state.as_mut() {
        state.custom = json!({"n": 1});
    }
    let mut saved = put(&*store, None, row).await;
    let id = saved.snapshot_id.clone();
    let before = get_present(&*store, &id).await;

    saved.state.as_mut().expect("state").custom = json!({"n": 2});
    saved.status = SnapshotStatus::Failed;
    let mut read = get_present(&*store, &id).await;
    assert_eq!(read, before, "changing the saved value changed the store");
    read.state.as_mut().expect("state").custom = json!({"n": 3});
    assert_eq!(
        get_present(&*store, &id).await,
        before,
        "changing a read value changed the store"
    );
    let latest = store
        .get_latest_snapshot(&session)
        .await
        .expect("latest failed")
        .expect("latest");
    assert_eq!(latest, before);
}

/// A row whose JSON has no `status` is `completed`, and a new snapshot is
/// stored as `completed`.
pub async fn default_status_is_completed(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let row: Snapshot = serde_json::from_value(json!({
        "sessionId": session,
        "createdAt": "2024-05-06T07:08:09Z",
        "updatedAt": "2024-05-06T07:08:09Z",
    }))
    .expect("decode snapshot");
    let saved = put(&*store, None, row).await;
    assert_eq!(
        get_present(&*store, &saved.snapshot_id).await.status,
        SnapshotStatus::Completed
    );
    let fresh = put(&*store, None, snapshot(&session)).await;
    assert_eq!(
        get_present(&*store, &fresh.snapshot_id).await.status,
        SnapshotStatus::Completed
    );
}

/// An update returning `None` writes nothing and the save returns `None`.
pub async fn skip_write_writes_nothing(store: Arc<dyn SessionStore>) {
    let id = fresh_id("skip");
    let result = save(&*store, Some(&id), Box::new(|_| Ok(None)))
        .await
        .expect("save failed");
    assert!(result.is_none(), "a skipped write returns None");
    assert!(get(&*store, &id).await.is_none(), "a skipped write created a row");

    let saved = put(&*store, Some(&id), snapshot(&fresh_session())).await;
    let result = save(&*store, Some(&id), Box::new(|_| Ok(None)))
        .await
        .expect("save failed");
    assert!(result.is_none());
    assert_eq!(
        get_present(&*store, &id).await,
        saved,
        "a skipped write changed the row"
    );
}

/// An update returning an error writes nothing, and the save returns that
/// error with its status.
pub async fn update_error_writes_nothing(store: Arc<dyn SessionStore>) {
    let id = fresh_id("fail");
    let err = save(
        &*store,
        Some(&id),
        Box::new(|_| Err(Error::Aborted("no thanks".into()))),
    )
    .await
    .expect_err("the update's error should be returned");
    assert_eq!(err.status(), Status::Aborted);
    assert!(err.to_string().contains("no thanks"), "message lost: {err}");
    assert!(get(&*store, &id).await.is_none(), "a failed update created a row");

    let saved = put(&*store, Some(&id), snapshot(&fresh_session())).await;
    let err = save(
        &*store,
        Some(&id),
        Box::new(|_| Err(Error::FailedPrecondition("not now".into()))),
    )
    .await
    .expect_err("the update's error should be returned");
    assert_eq!(err.status(), Status::FailedPrecondition);
    assert_eq!(
        get_present(&*store, &id).await,
        saved,
        "a failed update changed the row"
    );
}

/// The store keeps the caller's timestamps exactly, to the nanosecond.
pub async fn caller_timestamps_are_kept(store: Arc<dyn SessionStore>) {
    let created: DateTime<Utc> = Utc
        .timestamp_opt(981_173_106, 123_456_789)
        .single()
        .expect("valid time");
    let mut row = snapshot(&fresh_session());
    row.created_at = created;
    row.updated_at = created + Duration::nanoseconds(1);
    row.resumed_at = Some(created + Duration::seconds(3) + Duration::nanoseconds(7));
    row.status = SnapshotStatus::Aborted;
    row.heartbeat_at = Some(created + Duration::seconds(2));
    let saved = put(&*store, None, row.clone()).await;
    let read = get_present(&*store, &saved.snapshot_id).await;
    assert_eq!(read.created_at, row.created_at);
    assert_eq!(read.updated_at, row.updated_at);
    assert_eq!(read.heartbeat_at, row.heartbeat_at);
    assert_eq!(read.resumed_at, row.resumed_at);
    row.snapshot_id = saved.snapshot_id.clone();
    assert_eq!(read, row, "the stored row differs from what was saved");
}

/// A row without a session id is refused and nothing is written.
pub async fn missing_session_id_is_rejected(store: Arc<dyn SessionStore>) {
    let id = fresh_id("nosession");
    let row = snapshot("");
    let err = save(&*store, Some(&id), Box::new(move |_| Ok(Some(row))))
        .await
        .expect_err("a row without session id must be refused");
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    assert!(get(&*store, &id).await.is_none());
    let row = snapshot("");
    assert!(save(&*store, None, Box::new(move |_| Ok(Some(row)))).await.is_err());
}

/// Rewriting a row with another session id fails and leaves it unchanged;
/// the same session id is fine.
pub async fn session_id_never_changes(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let saved = put(&*store, None, snapshot(&session)).await;
    let id = saved.snapshot_id.clone();
    let other = fresh_session();
    let err = save(
        &*store,
        Some(&id),
        Box::new(move |existing| {
            let mut next = existing.cloned().expect("row");
            next.session_id = other;
            Ok(Some(next))
        }),
    )
    .await
    .expect_err("changing the session id must fail");
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert_eq!(get_present(&*store, &id).await, saved);

    let updated = save(
        &*store,
        Some(&id),
        Box::new(|existing| {
            let mut next = existing.cloned().expect("row");
            next.status = SnapshotStatus::Failed;
            Ok(Some(next))
        }),
    )
    .await
    .expect("same session id should save")
    .expect("written");
    assert_eq!(updated.session_id, session);
    assert_eq!(get_present(&*store, &id).await.status, SnapshotStatus::Failed);
}

/// Content a database could mangle comes back exactly: NUL and other
/// control characters, non-ASCII text, big integers, floats, deep nesting.
pub async fn unusual_content_round_trips(store: Arc<dyn SessionStore>) {
    let mut row = snapshot(&fresh_session());
    let mut deep = json!("bottom");
    for _ in 0..64 {
        deep = json!({"down": deep});
    }
    row.state.as_mut().expect("state").custom = json!({
        "nul": "a\u{0000}b",
        "controls": "\t\n\r\u{0001}\u{001f}",
        "text": "héllo, 世界, 🚀, \u{2028}",
        "quote": "it's \"quoted\" \\ back",
        "big": u64::MAX,
        "negative": i64::MIN,
        "float": 0.1_f64 + 0.2_f64,
        "tiny": 5e-324_f64,
        "deep": deep,
    });
    let mut meta = serde_json::Map::new();
    meta.insert("principal".into(), json!("user:ï"));
    row.metadata = Some(meta);
    row.agent = Some("agent-ü".into());
    let saved = put(&*store, Some(&fresh_id("odd'; DROP TABLE x; --")), row.clone()).await;
    let read = get_present(&*store, &saved.snapshot_id).await;
    assert_eq!(read, saved);
    assert_eq!(read.state, row.state);
}
