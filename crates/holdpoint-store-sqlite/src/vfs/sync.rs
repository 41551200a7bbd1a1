//! How a WAL file is synced: SQLite's own first sync, `fdatasync` after
//! it on Linux (see the [module docs](super)).

use std::ffi::CStr;

use rusqlite::ffi;

/// How a WAL file's syncs are made (see the module docs).
pub(super) struct Syncer {
    /// A second, read-only descriptor of the WAL, for `fdatasync` (which
    /// syncs the file, whichever descriptor wrote it). `None` where
    /// every sync is SQLite's own, or when it could not be opened.
    /// Closing it cannot drop a lock of SQLite's (closing any descriptor
    /// drops the process's POSIX locks on that file): SQLite locks the
    /// database file and its WAL index, never the WAL.
    pub(super) data_only: Option<std::fs::File>,
    /// Whether SQLite's own sync succeeded once (and so synced the
    /// directory of a WAL it created).
    pub(super) synced_once: bool,
}

impl Syncer {
    /// The syncer of the WAL SQLite just opened at `name`.
    ///
    /// SAFETY: `name` must be null or a NUL-terminated path.
    pub(super) unsafe fn open(name: ffi::sqlite3_filename) -> Self {
        #[cfg(target_os = "linux")]
        let data_only = if name.is_null() {
            None
        } else {
            use std::os::unix::ffi::OsStrExt;
            // SAFETY: as the caller guarantees.
            let path = unsafe { CStr::from_ptr(name) };
            std::fs::File::open(std::ffi::OsStr::from_bytes(path.to_bytes())).ok()
        };
        #[cfg(not(target_os = "linux"))]
        let data_only = {
            let _ = name;
            None
        };
        Syncer {
            data_only,
            synced_once: false,
        }
    }
}

/// Which call synced a WAL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyncKind {
    /// SQLite's own `xSync` (`fsync`, or `F_FULLFSYNC` on macOS when asked
    /// for a full sync; plus the directory after creating the file).
    Sqlite,
    /// `fdatasync` on the WAL, made here.
    DataOnly,
}

#[cfg(test)]
thread_local! {
    /// Syncs made on this thread, by kind: `[Sqlite, DataOnly]`.
    static SYNCS: std::cell::Cell<[u32; 2]> = const { std::cell::Cell::new([0, 0]) };
}

/// Counts a sync (in test builds; SQLite syncs on the calling thread, so
/// a test sees exactly its own).
pub(super) fn count(kind: SyncKind) {
    #[cfg(test)]
    SYNCS.with(|c| {
        let mut n = c.get();
        n[kind as usize] += 1;
        c.set(n);
    });
    #[cfg(not(test))]
    let _ = kind;
}

/// The syncs this thread made since the last call, by kind.
#[cfg(test)]
pub(crate) fn take_syncs() -> [u32; 2] {
    SYNCS.with(|c| c.replace([0, 0]))
}
