//! Two handles (two pools, as two processes would have) on one file.

use std::sync::Arc;

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
