//! Test helpers shared by Holdpoint's crates and by anyone writing a
//! [`SessionStore`](holdpoint::session::SessionStore).
//!
//! - [`store_suite`]: the store contract, one async function per behaviour,
//!   and [`run_store_suite`], which runs every case against stores made by
//!   a factory. Every store in this workspace runs it; a third-party store
//!   should too:
//!
//!   ```no_run
//!   use std::sync::Arc;
//!   use holdpoint::session::{InMemoryStore, SessionStore};
//!
//!   # async fn demo() {
//!   holdpoint_testkit::run_store_suite(|| async {
//!       Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>
//!   })
//!   .await;
//!   # }
//!   ```
//!
//!   [`run_two_handle_suite`] adds the cases that need two handles on one
//!   database (two pools, as two replicas would have).
//! - [`resume`]: exactly-once resume through the agent API over two store
//!   handles (docs/reference.md §7), for every durable store.
//! - [`postgres`]: [`TempPostgres`], a throwaway PostgreSQL server for tests.
//! - [`state_machine`]: the snapshot life cycle as a property test (proptest)
//!   against a reference model; [`state_machine::check`] takes a store factory.
//!
//! Helpers panic on failure: this crate is for tests only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod postgres;
pub mod resume;
pub mod state_machine;
pub mod store_suite;

pub use postgres::TempPostgres;
pub use store_suite::{CASES, StoreCase, claim_update, run_store_suite, run_two_handle_suite};
