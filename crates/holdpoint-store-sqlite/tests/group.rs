//! Group commit: concurrent writes share a transaction, yet each caller
//! gets its own result and a failed update rolls back only its own write.

use std::sync::Arc;

use holdpoint::session::{SessionState, SessionStore, Snapshot};
use holdpoint::{Error, Result};
use holdpoint_store_sqlite::SqliteStore;

/// Saves rows `row-0` … `row-{n-1}` at once, each from its own task, row
/// `i` through `update(i)` (which writes session `s{i}`, or fails); gives
/// each task's `(i, id, result)`, or the task's panic.
async fn save_at_once(
    store: &Arc<SqliteStore>,
    n: usize,
    update: fn(usize) -> Result<Option<Snapshot>>,
) -> Vec<std::result::Result<(usize, String, Result<Option<Snapshot>>), tokio::task::JoinError>> {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let id = format!("row-{i}");
                let result = store.save_snapshot(Some(&id), Box::new(move |_| update(i))).await;
                (i, id, result)
            })
        })
        .collect();
    futures::future::join_all(calls).await
}

fn session_row(i: usize) -> Result<Option<Snapshot>> {
    Ok(Some(Snapshot::new(SessionState::new(format!("s{i}")))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_update_in_a_batch_rolls_back_only_its_own_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("group.db")).await.unwrap());
    let calls = save_at_once(&store, 200, |i| {
        if i % 3 == 0 {
            Err(Error::InvalidArgument(format!("no {i}")))
        } else {
            session_row(i)
        }
    })
    .await;
    for call in calls {
        let (i, id, result) = call.unwrap();
        let read = store.get_snapshot(&id).await.unwrap();
        if i % 3 == 0 {
            assert!(
                matches!(result, Err(Error::InvalidArgument(ref m)) if m == &format!("no {i}")),
                "{result:?}"
            );
            assert!(read.is_none(), "row {i} was rolled back");
        } else {
            let saved = result.unwrap().unwrap();
            assert_eq!(saved.snapshot_id, id);
            assert_eq!(read.unwrap().session_id, format!("s{i}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queued_together_see_each_other_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("order.db")).await.unwrap());
    // Many concurrent "create if absent" updates of one row: exactly one writes.
    let mut calls = Vec::new();
    for i in 0..64 {
        let store = Arc::clone(&store);
        calls.push(tokio::spawn(async move {
            store
                .save_snapshot(
                    Some("one"),
                    Box::new(move |existing| match existing {
                        Some(_) => Err(Error::Aborted("taken".into())),
                        None => Ok(Some(Snapshot::new(SessionState::new(format!("s{i}"))))),
                    }),
                )
                .await
        }));
    }
    let mut won = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(Some(_)) => won += 1,
            Err(Error::Aborted(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(won, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_panics_fails_alone_and_the_store_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("panics.db")).await.unwrap());
    let calls = save_at_once(&store, 100, |i| {
        assert!(i % 4 != 0, "update {i} panics");
        session_row(i)
    })
    .await;
    for call in calls {
        let (i, id, result) = call.expect("a panicking update must not take its caller's task down");
        let read = store.get_snapshot(&id).await.unwrap();
        if i % 4 == 0 {
            let err = result.expect_err("the panicking update fails");
            assert_eq!(err.status(), holdpoint::Status::Internal, "{err}");
            assert!(err.to_string().contains("panicked"), "{err}");
            assert!(read.is_none());
        } else {
            assert_eq!(result.unwrap().unwrap().snapshot_id, id);
            assert_eq!(read.unwrap().session_id, format!("s{i}"));
        }
    }
    let after = Snapshot::new(SessionState::new("s-after"));
    store
        .save_snapshot(Some("after"), Box::new(move |_| Ok(Some(after))))
        .await
        .unwrap();
    assert!(store.get_snapshot("after").await.unwrap().is_some());
}
