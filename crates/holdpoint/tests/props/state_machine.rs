//! The snapshot state machine of `InMemoryStore` against the reference
//! model in `holdpoint_testkit::state_machine`.

use std::sync::Arc;

use holdpoint::session::{InMemoryStore, SessionStore};

#[test]
fn in_memory_store_follows_the_snapshot_model() {
    holdpoint_testkit::state_machine::check(256, || async {
        Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>
    });
}

#[test]
fn one_shared_in_memory_store_follows_the_snapshot_model() {
    // Cases share one store, as they would share one database.
    let store = InMemoryStore::new();
    holdpoint_testkit::state_machine::check(64, move || {
        let store = store.clone();
        async move { Arc::new(store) as Arc<dyn SessionStore> }
    });
}
