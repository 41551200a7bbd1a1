//! The group commit under contention: writes queued together share a
//! statement, yet each keeps its own outcome.

use std::sync::Arc;

use futures::future::join_all;
use holdpoint::Status;
use holdpoint::session::AuditStore;
use holdpoint::session::{AuditQuery, AuditRecord, ResumeClaim, SessionState, SessionStore, Snapshot};
use holdpoint_store_postgres::PostgresStore;
use holdpoint_testkit::TempPostgres;

fn audit(snapshot_id: &str, n: usize) -> AuditRecord {
    AuditRecord {
        id: format!("audit-{snapshot_id}-{n}"),
        agent: Some("group".into()),
        input_hash: String::new(),
        ..holdpoint_testkit::store_suite::approve_record(&format!("s-{snapshot_id}"), snapshot_id)
    }
}

async fn fresh(store: &PostgresStore, session: String, agent: &str) -> holdpoint::Result<Option<Snapshot>> {
    let mut row = Snapshot::new(SessionState::new(session));
    row.agent = Some(agent.to_owned());
    store.save_snapshot(None, Box::new(move |_| Ok(Some(row)))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_of_one_row_take_once_and_only_the_winner_is_audited() {
    let Some(pg) = TempPostgres::start_or_skip("concurrent_claims_of_one_row_take_once") else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(pg.url()).await.unwrap());
    for round in 0..5 {
        let ids: Vec<String> = join_all((0..3).map(|i| fresh(&store, format!("s-{round}-{i}"), "group")))
            .await
            .into_iter()
            .map(|saved| saved.unwrap().unwrap().snapshot_id)
            .collect();
        // 16 claims of each row, all queued at once, with fresh saves among them.
        let claims = ids.iter().flat_map(|id| {
            (0..16).map(|n| {
                let store = Arc::clone(&store);
                let id = id.clone();
                async move {
                    store
                        .claim_resume(ResumeClaim::new(id.clone()), vec![audit(&id, n)])
                        .await
                }
            })
        });
        let saves = (0..8).map(|i| {
            let store = Arc::clone(&store);
            async move { fresh(&store, format!("s-{round}-extra-{i}"), "group").await }
        });
        let (claims, saves) = tokio::join!(join_all(claims), join_all(saves));
        for saved in saves {
            assert!(saved.unwrap().is_some());
        }
        for (id, results) in ids.iter().zip(claims.chunks(16)) {
            let won = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(won, 1, "{id}: {results:?}");
            for err in results.iter().filter_map(|r| r.as_ref().err()) {
                assert_eq!(err.status(), Status::Aborted, "{err}");
            }
            let row = store.get_snapshot(id).await.unwrap().unwrap();
            assert!(row.resumed_at.is_some() && row.resume_lease_until.is_some(), "{row:?}");
            let records = store
                .list_audit(&AuditQuery {
                    session_id: Some(format!("s-{id}")),
                    ..AuditQuery::default()
                })
                .await
                .unwrap();
            assert_eq!(records.len(), 1, "{id}: only the winning claim is audited: {records:?}");
        }
    }
    let missing = store
        .claim_resume(ResumeClaim::new("no-such-row"), Vec::new())
        .await
        .unwrap_err();
    assert_eq!(missing.status(), Status::NotFound, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_server_rejects_fails_alone() {
    let Some(pg) = TempPostgres::start_or_skip("a_write_the_server_rejects_fails_alone") else {
        return;
    };
    let store = PostgresStore::connect(pg.url()).await.unwrap();
    // PostgreSQL text cannot hold NUL: that row's insert is rejected, and
    // with it the batch it shares; the others are written each on its own.
    let results = join_all((0..24).map(|i| {
        let agent = if i == 7 { "bad\0agent" } else { "good" };
        fresh(&store, format!("s-reject-{i}"), agent)
    }))
    .await;
    for (i, result) in results.into_iter().enumerate() {
        match result {
            Ok(Some(row)) if i != 7 => {
                let read = store.get_snapshot(&row.snapshot_id).await.unwrap();
                assert!(read.is_some(), "row {i} acknowledged but not stored");
            }
            Err(err) if i == 7 => assert_eq!(err.status(), Status::Internal, "{err}"),
            other => panic!("write {i}: {other:?}"),
        }
    }
}
