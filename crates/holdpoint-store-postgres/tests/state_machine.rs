//! The snapshot life cycle of `PostgresStore` against the reference model
//! in `holdpoint_testkit::state_machine` (random operation sequences), all
//! cases on one database through one pool.

use std::sync::Arc;

use holdpoint::session::SessionStore;
use holdpoint_store_postgres::PostgresStore;
use holdpoint_testkit::TempPostgres;

#[test]
fn postgres_store_follows_the_snapshot_model() {
    let Some(pg) = TempPostgres::start_or_skip("postgres_store_follows_the_snapshot_model") else {
        return;
    };
    let url = pg.url().to_owned();
    let store: Arc<tokio::sync::OnceCell<Arc<dyn SessionStore>>> = Arc::default();
    holdpoint_testkit::state_machine::check(48, move || {
        let (store, url) = (Arc::clone(&store), url.clone());
        async move {
            store
                .get_or_init(|| async {
                    Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn SessionStore>
                })
                .await
                .clone()
        }
    });
}
