//! The snapshot life cycle of `SqliteStore` against the reference model in
//! `holdpoint_testkit::state_machine` (random operation sequences).

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_sqlite::SqliteStore;

#[test]
fn a_fresh_sqlite_file_per_case_follows_the_snapshot_model() {
    let dir = tempfile::tempdir().unwrap();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let root = dir.path().to_owned();
    holdpoint_testkit::state_machine::check(32, move || {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = root.join(format!("case-{n}.db"));
        async move { Arc::new(SqliteStore::open(path).await.unwrap()) as Arc<dyn SessionStore> }
    });
}

#[test]
fn one_shared_sqlite_file_follows_the_snapshot_model() {
    // Cases share one file (and one writer), as they would in production.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let store: Arc<tokio::sync::OnceCell<Arc<dyn SessionStore>>> = Arc::default();
    holdpoint_testkit::state_machine::check(64, move || {
        let (store, path) = (Arc::clone(&store), path.clone());
        async move {
            store
                .get_or_init(|| async { Arc::new(SqliteStore::open(path).await.unwrap()) as Arc<dyn SessionStore> })
                .await
                .clone()
        }
    });
}
