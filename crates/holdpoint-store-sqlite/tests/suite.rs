//! The shared store contract, on real files.

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_sqlite::SqliteStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let counter = std::sync::atomic::AtomicUsize::new(0);
    holdpoint_testkit::run_store_suite(|| {
        // A fresh file for every case.
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = dir.path().join(format!("case-{n}.db"));
        async move { Arc::new(SqliteStore::open(path).await.unwrap()) as Arc<dyn SessionStore> }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shared_file_passes_the_suite() {
    // Every case on the same file, through fresh handles: cases must not
    // depend on an empty database.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    holdpoint_testkit::run_store_suite(|| {
        let path = path.clone();
        async move { Arc::new(SqliteStore::open(path).await.unwrap()) as Arc<dyn SessionStore> }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_without_a_channel_writes_only_the_timers_that_act() {
    use holdpoint::session::outbox::OutboxWrites;
    use holdpoint_store_sqlite::SqliteStoreOptions;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timers.db");
    let timers = SqliteStore::open_with(SqliteStoreOptions::new(&path).outbox_writes(OutboxWrites::Timers))
        .await
        .unwrap();
    let all = SqliteStore::open(&path).await.unwrap();
    holdpoint_testkit::store_suite::a_store_without_a_channel_writes_only_the_timers_that_act(
        Arc::new(timers),
        Arc::new(all),
    )
    .await;
}
