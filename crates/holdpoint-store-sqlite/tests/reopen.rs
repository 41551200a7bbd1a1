//! Data survives closing and reopening the file; options take effect.

use holdpoint::Status;
use holdpoint::session::{SessionState, SessionStore, Snapshot, SnapshotStatus};
use holdpoint_store_sqlite::{SqliteStore, SqliteStoreOptions, Synchronous};

#[tokio::test]
async fn data_survives_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/folder/sessions.db");
    let mut state = SessionState::new("s-reopen");
    state.custom = serde_json::json!({"plan": ["a", "b"]});
    let saved = {
        let store = SqliteStore::open(&path).await.unwrap();
        let row = Snapshot::new(state);
        let saved = store
            .save_snapshot(Some("snap-1"), Box::new(move |_| Ok(Some(row))))
            .await
            .unwrap()
            .unwrap();
        store.close().await;
        saved
    };
    assert!(path.is_file(), "the file should exist");
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.get_snapshot("snap-1").await.unwrap(), Some(saved.clone()));
    let latest = store.get_latest_snapshot("s-reopen").await.unwrap().unwrap();
    assert_eq!(latest, saved);
    // Reopening again does not re-apply migrations or lose anything.
    drop(store);
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.get_snapshot("snap-1").await.unwrap(), Some(saved));
}

#[tokio::test]
async fn pragmas_follow_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pragmas.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store.close().await;
    // WAL mode is a property of the file: the -wal file appears on write.
    let store = SqliteStore::open_with(SqliteStoreOptions::new(&path).synchronous(Synchronous::Normal))
        .await
        .unwrap();
    let row = Snapshot::new(SessionState::new("s"));
    store
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap();
    assert!(
        dir.path().join("pragmas.db-wal").exists(),
        "the database should be in WAL mode"
    );
}

#[tokio::test]
async fn a_closed_store_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("closed.db")).await.unwrap();
    store.close().await;
    let err = store.get_snapshot("x").await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
    let err = store
        .save_snapshot(None, Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s"))))))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
}

#[tokio::test]
async fn an_unopenable_path_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    // A folder where the file should be.
    let err = SqliteStore::open(dir.path()).await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
    assert!(err.to_string().contains("sqlite store"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_write_lock_times_out_as_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let holder = SqliteStore::open(&path).await.unwrap();
    let waiter =
        SqliteStore::open_with(SqliteStoreOptions::new(&path).busy_timeout(std::time::Duration::from_millis(200)))
            .await
            .unwrap();
    // Hold the write lock inside an update that waits for a signal.
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holding = tokio::spawn(async move {
        holder
            .save_snapshot(
                Some("held"),
                Box::new(move |_| {
                    entered_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    let mut row = Snapshot::new(SessionState::new("s"));
                    row.status = SnapshotStatus::Completed;
                    Ok(Some(row))
                }),
            )
            .await
    });
    tokio::task::spawn_blocking(move || entered_rx.recv().unwrap())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let err = waiter
        .save_snapshot(
            Some("other"),
            Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s"))))),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
    assert!(err.to_string().contains("locked"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    release_tx.send(()).unwrap();
    holding.await.unwrap().unwrap();
    assert!(waiter.get_snapshot("held").await.unwrap().is_some());
    assert!(
        waiter.get_snapshot("other").await.unwrap().is_none(),
        "the failed save wrote something"
    );
}
