//! The capability handles the suite's cases run through: a case of a
//! capability (listing, audit, grants, outbox, prune) takes its store's
//! handle of that trait from `capabilities()`, so a store is checked
//! through the very handles an agent, a server or a worker is given. A
//! store without the capability fails the case naming it.

use std::sync::Arc;

use holdpoint::session::{AuditStore, GrantStore, OutboxStore, PruneStore, SessionStore, SnapshotListing};

fn lacks(what: &str) -> ! {
    panic!("the store has no {what} capability; this case checks that trait")
}

/// The store's listing.
pub fn listing(store: &dyn SessionStore) -> Arc<dyn SnapshotListing> {
    store.capabilities().listing.unwrap_or_else(|| lacks("listing"))
}

/// The store's audit trail.
pub fn audit(store: &dyn SessionStore) -> Arc<dyn AuditStore> {
    store.capabilities().audit.unwrap_or_else(|| lacks("audit"))
}

/// The store's standing grants.
pub fn grants(store: &dyn SessionStore) -> Arc<dyn GrantStore> {
    store.capabilities().grants.unwrap_or_else(|| lacks("grants"))
}

/// The store's outbox.
pub fn outbox(store: &dyn SessionStore) -> Arc<dyn OutboxStore> {
    store.capabilities().outbox.unwrap_or_else(|| lacks("outbox"))
}

/// The store's pruning.
pub fn prune(store: &dyn SessionStore) -> Arc<dyn PruneStore> {
    store.capabilities().prune.unwrap_or_else(|| lacks("prune"))
}
