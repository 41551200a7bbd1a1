//! Opening a connection to the store's file, with the store's settings.
//!
//! Every connection of a store (the writer's and each reader's) runs in WAL
//! mode with the configured `synchronous` level and busy timeout. Opening
//! happens on the thread that will own the connection.

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Kind, classify};
use crate::options::SqliteStoreOptions;

/// Opens `options.path` (creating it if missing) and applies the store's
/// pragmas; retried while SQLite answers busy, for up to the busy timeout.
///
/// Switching a new file to WAL takes a lock that SQLite's busy handler does
/// not always wait for: two handles creating one file at once can see
/// `SQLITE_BUSY` straight away, hence the retries.
pub(crate) fn open(options: &SqliteStoreOptions) -> rusqlite::Result<Connection> {
    let started = Instant::now();
    loop {
        match try_open(options) {
            Err(e) if classify(&e) == Kind::Busy && started.elapsed() < options.busy_timeout => {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done,
        }
    }
}

fn try_open(options: &SqliteStoreOptions) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&options.path, flags)?;
    conn.busy_timeout(options.busy_timeout)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(target: "holdpoint::store::sqlite", journal_mode = %mode, "the database did not switch to WAL mode");
    }
    conn.pragma_update(None, "synchronous", options.synchronous.pragma())?;
    // The writer's statements and the readers' few queries stay prepared.
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}
