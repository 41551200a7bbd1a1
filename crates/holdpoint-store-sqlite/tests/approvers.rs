//! Migration 0009's `approvers` column: rows written without it are
//! listed for their approvers and filled in when the store opens.

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_sqlite::SqliteStore;
use holdpoint_testkit::store_suite::rows_without_approvers_are_listed_and_filled_in_on_opening;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_before_0009_are_listed_and_filled_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approvers.db");
    let store = Arc::new(SqliteStore::open(&path).await.unwrap()) as Arc<dyn SessionStore>;
    let unrecorded = |path: std::path::PathBuf| {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row(
            "SELECT count(*) FROM holdpoint_snapshots WHERE approvers IS NULL",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
    };
    let forget = {
        let path = path.clone();
        async move {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            assert_eq!(
                conn.execute("UPDATE holdpoint_snapshots SET approvers = NULL", [])
                    .unwrap(),
                2
            );
        }
    };
    let reopen = {
        let path = path.clone();
        async move { Arc::new(SqliteStore::open(path).await.unwrap()) as Arc<dyn SessionStore> }
    };
    rows_without_approvers_are_listed_and_filled_in_on_opening(store, forget, reopen).await;
    assert_eq!(unrecorded(path), 0, "the store filled in both rows on opening");
}
