//! Opening a connection to the store's file, with the store's settings.
//!
//! Every connection of a store (the writer's and each reader's) runs in WAL
//! mode with the configured `synchronous` level and busy timeout. Opening
//! happens on the thread that will own the connection.

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Kind, classify};
use crate::options::{SqliteStoreOptions, Synchronous};
use crate::vfs;

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

/// WAL pages after which a commit also copies them into the database
/// file (`PRAGMA wal_autocheckpoint`; SQLite's default is 1,000).
///
/// A checkpoint writes each page the WAL holds once, however often it was
/// committed, and syncs twice. A session's commits keep rewriting the same
/// few pages (the newest leaf of each index), so a longer interval writes
/// far fewer pages per commit (BENCHMARKS.md, "SQLite checkpoints"; a WAL
/// of 4,000 pages is about 16 MiB).
pub(crate) const CHECKPOINT_PAGES: i64 = 4000;

/// The most memory each connection's page cache may take, in KiB (`PRAGMA
/// cache_size` with a negative value; SQLite's default is 2,000 KiB). The
/// cache grows only as pages are read, so a small file never fills it.
///
/// A listing reads the newest entries of the waiting rows' indexes and
/// those rows' pages; with the default, a large store's reader re-read
/// them from the file on every page (BENCHMARKS.md, "The approver's page
/// at 1M on SQLite"). Five connections (the writer and four readers) may
/// hold up to 320 MiB between them on a file far larger than that.
pub(crate) const CACHE_KIB: i64 = 65_536;

fn try_open(options: &SqliteStoreOptions) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if batches_wal_writes(options.synchronous) {
        vfs::register().map_err(|code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None))?;
        Connection::open_with_flags_and_vfs(&options.path, flags, vfs::NAME)?
    } else {
        Connection::open_with_flags(&options.path, flags)?
    };
    conn.busy_timeout(options.busy_timeout)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(target: "holdpoint::store::sqlite", journal_mode = %mode, "the database did not switch to WAL mode");
    }
    conn.pragma_update(None, "synchronous", options.synchronous.pragma())?;
    conn.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    plan_without_arguments(&conn)?;
    // The writer's statements and the readers' few queries stay prepared.
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Makes SQLite plan each statement from its text alone, never from the
/// values bound to it (the query planner stability guarantee).
///
/// Otherwise SQLite reads a bound value while it checks whether a
/// partial index fits a term (`owner = ?2` against the owner index's
/// `owner IS NOT NULL`), and a statement run again with another value is
/// parsed and planned again first: every role page and audit listing was
/// (BENCHMARKS.md, "The approver's page at 1M on SQLite"). The store's
/// statements name the partial indexes' conditions in their text, so
/// their plans do not need the values.
pub(crate) fn plan_without_arguments(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// Whether connections go through [`vfs`], which writes a commit's WAL
/// frames in one call. Only when SQLite syncs the WAL at each commit: the
/// sync is what writes the held-back frames before the commit is
/// published to other connections.
fn batches_wal_writes(synchronous: Synchronous) -> bool {
    matches!(synchronous, Synchronous::Full | Synchronous::Extra)
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, c_void};

    use rusqlite::ffi;

    use super::*;

    /// The name of the VFS `conn` opened its file with.
    fn vfs_name(conn: &Connection) -> String {
        let mut vfs: *mut ffi::sqlite3_vfs = std::ptr::null_mut();
        // SAFETY: `SQLITE_FCNTL_VFS_POINTER` writes the connection's VFS
        // pointer, which lives as long as the process, into `vfs`.
        unsafe {
            let rc = ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_VFS_POINTER,
                (&raw mut vfs).cast::<c_void>(),
            );
            assert_eq!(rc, ffi::SQLITE_OK);
            CStr::from_ptr((*vfs).zName).to_str().unwrap().to_owned()
        }
    }

    /// The name of the platform's default VFS (`unix` on Linux).
    fn default_vfs_name() -> String {
        // SAFETY: the default VFS lives as long as the process.
        unsafe {
            let vfs = ffi::sqlite3_vfs_find(std::ptr::null());
            CStr::from_ptr((*vfs).zName).to_str().unwrap().to_owned()
        }
    }

    #[test]
    fn wal_writes_are_batched_only_where_each_commit_syncs() {
        let dir = tempfile::tempdir().unwrap();
        for (level, batched) in [
            (Synchronous::Off, false),
            (Synchronous::Normal, false),
            (Synchronous::Full, true),
            (Synchronous::Extra, true),
        ] {
            let options = SqliteStoreOptions::new(dir.path().join("v.db")).synchronous(level);
            let conn = open(&options).unwrap();
            let expected = if batched {
                vfs::NAME.to_str().unwrap().to_owned()
            } else {
                default_vfs_name()
            };
            assert_eq!(vfs_name(&conn), expected, "{level:?}");
        }
    }
}
