//! The store suite against the reference store, `InMemoryStore`.

use std::sync::Arc;

use holdpoint::session::{InMemoryStore, SessionStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_store_passes_the_suite() {
    holdpoint_testkit::run_store_suite(|| async { Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore> }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_clones_pass_the_two_handle_suite() {
    let store = InMemoryStore::new();
    holdpoint_testkit::run_two_handle_suite(Arc::new(store.clone()), Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_resume_is_exactly_once() {
    let store = InMemoryStore::new();
    holdpoint_testkit::resume::exactly_once_resume(Arc::new(store.clone()), Arc::new(store)).await;
}
