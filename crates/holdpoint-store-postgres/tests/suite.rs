//! The shared store contract.

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_postgres::PostgresStore;
use holdpoint_testkit::TempPostgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_suite() {
    let Some(pg) = TempPostgres::start_or_skip("postgres_store_passes_the_suite") else {
        return;
    };
    let url = pg.url().to_owned();
    holdpoint_testkit::run_store_suite(|| {
        let url = url.clone();
        // A fresh handle (pool) for every case, all on one database.
        async move { Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn SessionStore> }
    })
    .await;
}
