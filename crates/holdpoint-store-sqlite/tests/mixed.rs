//! Fresh saves, claims and reads from many tasks at once: batches that mix
//! every kind of write.

use std::sync::Arc;

use holdpoint::FinishReason;
use holdpoint::session::AuditStore;
use holdpoint::session::{AuditQuery, AuditRecord, ResumeClaim, SessionState, SessionStore, Snapshot};
use holdpoint_store_sqlite::SqliteStore;
use holdpoint_testkit::store_suite::approve_record;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_batches_save_claim_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("mixed.db")).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            for round in 0..20 {
                let session = format!("s{i}-{round}");
                let mut row = Snapshot::new(SessionState::new(session.clone()));
                row.finish_reason = Some(FinishReason::Interrupted);
                let saved = store
                    .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
                    .await
                    .unwrap()
                    .unwrap();
                let latest = store.get_latest_snapshot(&session).await.unwrap().unwrap();
                assert_eq!(latest.snapshot_id, saved.snapshot_id);
                let records: Vec<AuditRecord> = (0..2).map(|k| record(&session, &saved.snapshot_id, k)).collect();
                store
                    .claim_resume(ResumeClaim::new(saved.snapshot_id.clone()), records.clone())
                    .await
                    .unwrap();
                let trail = store
                    .list_audit(&AuditQuery {
                        session_id: Some(session.clone()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                assert_eq!(trail.len(), 2, "{trail:?}");
                assert!(trail.iter().all(|r| records.contains(r)));
                let claimed = store.get_snapshot(&saved.snapshot_id).await.unwrap().unwrap();
                assert!(claimed.resumed_at.is_some());
                let next = Snapshot::new(SessionState::new(session.clone()));
                let done = store
                    .save_snapshot(None, Box::new(move |_| Ok(Some(next))))
                    .await
                    .unwrap()
                    .unwrap();
                let latest = store.get_latest_snapshot(&session).await.unwrap().unwrap();
                assert!(latest.snapshot_id == done.snapshot_id || latest.created_at == done.created_at);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

fn record(session: &str, snapshot_id: &str, k: usize) -> AuditRecord {
    AuditRecord {
        principal: Some(format!("p{k}")),
        ..approve_record(session, snapshot_id)
    }
}
