//! `SqliteStore`: Holdpoint's embedded [`SessionStore`](holdpoint::session::SessionStore),
//! one SQLite file that needs no set-up.
//!
//! - [`SqliteStore::open`] creates the file and its schema on first use
//!   (migrations in `migrations/`, applied once each), in WAL mode with
//!   `synchronous=FULL`: a save that returned is on disk, so an interrupt
//!   announced after its save survives a crash (docs/reference.md §7.3).
//! - [`SqliteStoreOptions`] changes durability ([`Synchronous`]), how long a
//!   write waits for another writer, how many reads run at once and the
//!   watch poll interval.
//! - Each save runs in a `BEGIN IMMEDIATE` transaction: read the row, run
//!   the update, write, commit. Saves made at the same time share one
//!   transaction and one commit (group commit); an update that fails has
//!   written nothing, so it fails alone. SQLite is called on the caller's
//!   thread: writes on the writer's connection, single-row reads on it
//!   when it is free or else on an idle read connection; listings, and
//!   writes that must wait for a lock, on tokio's blocking pool. Any
//!   number of handles and processes may share the file; two resumes of
//!   one snapshot never both claim it (docs/reference.md §7).
//! - With `synchronous` at `FULL` or `EXTRA`, connections go through a
//!   small VFS over SQLite's own that writes each commit's WAL frames to
//!   the file in one system call instead of two per page; the bytes on
//!   disk are the same. On Linux it also syncs the WAL with `fdatasync`
//!   (the bundled SQLite would use `fsync`, which writes the inode's
//!   timestamps too), in every build, with no build flags.
//! - A commit checkpoints the WAL into the database file once it holds
//!   4,000 pages, so beside `sessions.db` the `sessions.db-wal` file grows
//!   to about 16 MiB and is then reused.
//! - Status watchers hear this handle's writes at once and poll for other
//!   processes' writes (100 ms by default).
//! - On Unix the folders and the database file the store creates are
//!   owner-only (`0700`, `0600`; the `-wal` and `-shm` files take the
//!   database file's mode); existing ones keep theirs, with a warning when
//!   the database file is open to its group or others.
//! - Failures map to Holdpoint errors: a locked, unreadable or full
//!   database is `UNAVAILABLE`; nothing half-written is ever visible.
//!
//! Rows hold the whole snapshot as JSON next to indexed columns
//! (`snapshot_id`, `session_id`, `created_at_ns`, `status`, …) in the
//! table `holdpoint_snapshots`.
#![deny(missing_docs)]

mod conn;
mod dialect;
mod endpoints;
mod error;
mod files;
mod grants;
mod group;
mod options;
mod outbox;
mod prune;
mod read;
mod readers;
mod schema;
mod store;
mod vfs;
mod watch;
mod write;

pub use options::{SqliteStoreOptions, Synchronous};
pub use store::SqliteStore;
