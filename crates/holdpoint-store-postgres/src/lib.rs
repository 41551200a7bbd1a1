//! `PostgresStore`: Holdpoint's [`SessionStore`](holdpoint::session::SessionStore)
//! for many replicas sharing one PostgreSQL database.
//!
//! - [`PostgresStore::connect`] opens a pool and applies the migrations in
//!   `migrations/` (each once; replicas starting together take turns).
//! - [`PostgresStoreOptions`] sets pool size, timeouts and how often status
//!   watchers re-read their rows.
//! - A save of a given id is one transaction that locks its row before the
//!   update runs (`SELECT … FOR UPDATE`, or an advisory lock on an id not
//!   yet written). Saves under a freshly minted id and first claims of a
//!   resume go through a group commit instead: the writes queued meanwhile
//!   share one statement and one commit. A claim takes only a row not yet
//!   claimed, so two resumes of one snapshot never both claim it, on any
//!   replica (docs/reference.md §7).
//! - A trigger announces status changes of existing rows with NOTIFY;
//!   watchers on every replica hear them, so an abort reaches the replica
//!   running the turn.
//! - Failures map to Holdpoint errors: an unreachable or overloaded
//!   server, a lock timeout or a dropped connection is `UNAVAILABLE`;
//!   nothing half-written is ever visible.
//!
//! | feature | enables |
//! |---|---|
//! | `tls-rustls` | TLS to the server (`sslmode=require` and stricter) via rustls |
//!
//! Rows hold the whole snapshot as JSON next to indexed columns
//! (`snapshot_id`, `session_id`, `created_at_ns`, `status`, …) in the
//! table `holdpoint_snapshots`.
#![deny(missing_docs)]

mod batch;
mod claim;
mod dialect;
mod endpoints;
mod error;
mod grants;
mod group;
mod latest;
mod listen;
mod options;
mod outbox;
mod prune;
mod read;
mod schema;
mod store;
mod write;

pub use options::PostgresStoreOptions;
pub use store::PostgresStore;
