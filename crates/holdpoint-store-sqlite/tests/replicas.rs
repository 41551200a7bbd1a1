//! Two handles (two pools, as two processes would have) on one file.

use std::sync::Arc;

use holdpoint::session::AuditStore;
use holdpoint_store_sqlite::SqliteStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_on_one_file_pass_the_two_handle_suite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replicas.db");
    let a = SqliteStore::open(&path).await.unwrap();
    let b = SqliteStore::open(&path).await.unwrap();
    holdpoint_testkit::run_two_handle_suite(Arc::new(a), Arc::new(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_opening_a_new_file_at_once_both_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    let (a, b) = tokio::join!(SqliteStore::open(&path), SqliteStore::open(&path));
    let (a, b) = (a.unwrap(), b.unwrap());
    holdpoint_testkit::store_suite::two_handles_see_each_other(Arc::new(a), Arc::new(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_through_two_handles_is_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resume.db");
    let a = SqliteStore::open(&path).await.unwrap();
    let b = SqliteStore::open(&path).await.unwrap();
    holdpoint_testkit::resume::exactly_once_resume(Arc::new(a), Arc::new(b)).await;
}

/// A handle claims the rows it wrote without reading them first (it
/// remembers what it stored); when another handle changed such a row in
/// between, the claim must still be decided on the row as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_sees_what_another_handle_wrote_since() {
    use chrono::{Duration, Utc};
    use holdpoint::session::{AuditQuery, AuditRecord, ResumeClaim, SessionState, SessionStore, Snapshot};
    use holdpoint::{FinishReason, Status};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.db");
    let a = SqliteStore::open(&path).await.unwrap();
    let b = SqliteStore::open(&path).await.unwrap();
    let record = |snapshot_id: &str, who: &str| AuditRecord {
        principal: Some(who.to_owned()),
        ..holdpoint_testkit::store_suite::approve_record("s", snapshot_id)
    };
    let waiting = || {
        let mut row = Snapshot::new(SessionState::new("s"));
        row.finish_reason = Some(FinishReason::Interrupted);
        row
    };
    let save = |store: &SqliteStore, row: Snapshot| {
        let store = store.clone();
        async move {
            store
                .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
                .await
                .unwrap()
                .unwrap()
                .snapshot_id
        }
    };

    // Written by A, claimed by B, then by A: A must lose, and leave no record.
    let id = save(&a, waiting()).await;
    b.claim_resume(ResumeClaim::new(id.clone()), vec![record(&id, "bob")])
        .await
        .unwrap();
    let err = a
        .claim_resume(ResumeClaim::new(id.clone()), vec![record(&id, "alice")])
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Aborted, "{err}");

    // Written and claimed by A (lease lapsed), taken over by B, then taken
    // over by A: B's takeover holds a live lease, so A's is refused.
    let doubt = save(&a, waiting()).await;
    let lapsed = ResumeClaim {
        snapshot_id: doubt.clone(),
        lease_until: Utc::now() - Duration::seconds(1),
        takeover: false,
    };
    a.claim_resume(lapsed, Vec::new()).await.unwrap();
    let takeover = || ResumeClaim {
        snapshot_id: doubt.clone(),
        lease_until: Utc::now() + Duration::seconds(60),
        takeover: true,
    };
    b.claim_resume(takeover(), vec![record(&doubt, "bob")]).await.unwrap();
    let err = a
        .claim_resume(takeover(), vec![record(&doubt, "alice")])
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");

    // Only B's records are in the trail.
    let trail = a
        .list_audit(&AuditQuery {
            session_id: Some("s".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let who: Vec<_> = trail.iter().filter_map(|r| r.principal.as_deref()).collect();
    assert_eq!(who, ["bob", "bob"], "{trail:?}");

    // A claim of a row A wrote and nobody touched goes through once.
    let mine = save(&a, waiting()).await;
    a.claim_resume(ResumeClaim::new(mine.clone()), Vec::new())
        .await
        .unwrap();
    let err = b
        .claim_resume(ResumeClaim::new(mine.clone()), Vec::new())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Aborted, "{err}");
    assert!(b.get_snapshot(&mine).await.unwrap().unwrap().resumed_at.is_some());
}
