//! Migration 0009's `approvers` column: rows written without it are
//! listed for their approvers and filled in when the store opens.

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_postgres::PostgresStore;
use holdpoint_testkit::TempPostgres;
use holdpoint_testkit::store_suite::rows_without_approvers_are_listed_and_filled_in_on_opening;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_before_0009_are_listed_and_filled_in() {
    let Some(pg) = TempPostgres::start_or_skip("rows_written_before_0009_are_listed_and_filled_in") else {
        return;
    };
    let url = pg.url().to_owned();
    let store = Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn SessionStore>;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let forget = {
        let pool = pool.clone();
        async move {
            let done = sqlx::query("UPDATE holdpoint_snapshots SET approvers = NULL")
                .execute(&pool)
                .await
                .unwrap();
            assert_eq!(done.rows_affected(), 2);
        }
    };
    let reopen = {
        let url = url.clone();
        async move { Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn SessionStore> }
    };
    rows_without_approvers_are_listed_and_filled_in_on_opening(store, forget, reopen).await;
    let unrecorded: i64 = sqlx::query_scalar("SELECT count(*) FROM holdpoint_snapshots WHERE approvers IS NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unrecorded, 0, "the store filled in both rows on opening");
}
