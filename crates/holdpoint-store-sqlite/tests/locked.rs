//! A database locked by another writer (another process, or another handle
//! on the file): writes wait for it off the runtime's threads, up to the
//! busy timeout, and then fail whole.

use std::time::Duration;

use holdpoint::Status;
use holdpoint::session::{SessionState, SessionStore, Snapshot};
use holdpoint_store_sqlite::{SqliteStore, SqliteStoreOptions};

/// Another connection to `path` holding the write lock until dropped
/// (rolled back) or committed.
fn hold_write_lock(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

fn row(session: &str) -> Snapshot {
    Snapshot::new(SessionState::new(session))
}

// One runtime thread: a write that blocked it while waiting for the lock
// would stop everything else on the runtime for the whole busy timeout.
#[tokio::test(flavor = "current_thread")]
async fn a_write_waits_for_the_lock_without_holding_up_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let busy_timeout = Duration::from_secs(30);
    let store = SqliteStore::open_with(SqliteStoreOptions::new(&path).busy_timeout(busy_timeout))
        .await
        .unwrap();
    let before = row("s-before");
    store
        .save_snapshot(Some("before"), Box::new(move |_| Ok(Some(before))))
        .await
        .unwrap();

    let other = hold_write_lock(&path);
    let writing = tokio::spawn({
        let store = store.clone();
        async move {
            let next = row("s-during");
            store
                .save_snapshot(Some("during"), Box::new(move |_| Ok(Some(next))))
                .await
        }
    });
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!writing.is_finished(), "the write should wait for the lock");
    // The runtime's only thread is free: reads go on meanwhile.
    let read = store.get_snapshot("before").await.unwrap();
    assert!(read.is_some());
    // Not a speed check: a write waiting on the runtime's thread would
    // have held it for the whole busy timeout (30 s) before this point.
    assert!(
        started.elapsed() < busy_timeout / 3,
        "the runtime's thread was held up while the write waited for the lock ({:?})",
        started.elapsed()
    );

    other.execute_batch("COMMIT").unwrap();
    let saved = writing.await.unwrap().unwrap().unwrap();
    assert_eq!(saved.snapshot_id, "during");
    assert!(store.get_snapshot("during").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_still_locked_after_the_busy_timeout_fail_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stuck.db");
    let options = SqliteStoreOptions::new(&path).busy_timeout(Duration::from_millis(200));
    let store = SqliteStore::open_with(options).await.unwrap();
    let other = hold_write_lock(&path);
    let mut writes = Vec::new();
    for i in 0..4 {
        let store = store.clone();
        writes.push(tokio::spawn(async move {
            let next = row(&format!("s{i}"));
            let id = format!("stuck-{i}");
            store.save_snapshot(Some(&id), Box::new(move |_| Ok(Some(next)))).await
        }));
    }
    for write in writes {
        let err = write.await.unwrap().expect_err("the lock is never released in time");
        assert_eq!(err.status(), Status::Unavailable, "{err}");
        assert!(err.to_string().contains("locked"), "{err}");
    }
    drop(other);
    for i in 0..4 {
        assert!(store.get_snapshot(&format!("stuck-{i}")).await.unwrap().is_none());
    }
    // Once the lock is free, writes go through again.
    let next = row("s-after");
    store
        .save_snapshot(Some("after"), Box::new(move |_| Ok(Some(next))))
        .await
        .unwrap();
    assert!(store.get_snapshot("after").await.unwrap().is_some());
}
