//! A SQLite VFS that hands each commit's WAL frames to the kernel in one
//! `write` instead of two per page.
//!
//! SQLite writes a WAL frame as two calls: its 24-byte header, then the
//! page. A commit of seven pages is fourteen `pwrite` calls, and on Linux
//! each call walks the page cache for every 4 KiB page it touches (a
//! frame straddles two). This VFS wraps the platform's default one and,
//! for WAL files only, keeps writes that follow one another in memory and
//! writes them as one block when SQLite next syncs, reads, sizes,
//! truncates or closes the file, or writes somewhere else in it.
//!
//! Why this is safe: a commit becomes visible to other connections only
//! when SQLite publishes it in the WAL index, which it does after syncing
//! the WAL when `synchronous` is `FULL` or `EXTRA`; the sync writes the
//! buffered frames first. The store therefore opens its connections
//! through this VFS only at those levels (see [`conn`](crate::conn)). The
//! bytes on disk, and so the file format, are exactly those SQLite wrote.
//! Every other file (the database, the WAL index, journals) is opened by
//! the default VFS directly, with its own methods.
//!
//! On Linux a WAL's syncs after its first are `fdatasync`, called here
//! whatever options SQLite was compiled with (the bundled SQLite uses
//! `fsync`, which also writes the inode's timestamps: one more journal
//! commit per commit). A commit needs only the WAL's bytes and size on
//! disk, which `fdatasync` guarantees. The first sync of each opened WAL
//! is SQLite's own: for a WAL it created it also syncs the directory, so
//! the file's name is durable too. Elsewhere every sync is SQLite's own,
//! which on macOS is `F_FULLFSYNC` when SQLite asks for `SQLITE_SYNC_FULL`
//! (`PRAGMA fullfsync`) and `fsync` otherwise.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use sync::Syncer;
#[cfg(test)]
pub(crate) use sync::take_syncs;
use wal::{INNER_OFFSET, Pending, WAL_METHODS, WalFile};

mod sync;
#[cfg(test)]
mod tests;
mod wal;

/// The name the VFS is registered under.
pub(crate) const NAME: &CStr = c"holdpoint-wal-batch";

/// Buffered WAL bytes are written once they reach this size, so a large
/// transaction does not hold all its frames in memory.
const MAX_PENDING: usize = 1 << 20;

/// The most bytes handed to the wrapped VFS in one write. SQLite's unix
/// VFS keeps only the low 17 bits of a write's length (a write of exactly
/// 128 KiB would write nothing), so writes stay below 128 KiB.
const MAX_WRITE: usize = 64 << 10;

/// Registers the VFS with SQLite, once per process. Fails with SQLite's
/// result code when there is no default VFS to wrap.
pub(crate) fn register() -> Result<(), c_int> {
    static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vfs_find` initialises SQLite and returns the
        // default VFS, which lives for the rest of the process. The VFS
        // built here is leaked, as SQLite keeps a pointer to it forever.
        unsafe {
            let base = ffi::sqlite3_vfs_find(ptr::null());
            if base.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            let vfs = Box::leak(Box::new(wrap(base)));
            match ffi::sqlite3_vfs_register(vfs, 0) {
                ffi::SQLITE_OK => Ok(()),
                code => Err(code),
            }
        }
    })
}

/// Our VFS: the default VFS's settings, room for our state before its
/// file object, our `xOpen`, and the rest forwarded to it.
///
/// SAFETY: `base` must point to a registered VFS that is never freed.
unsafe fn wrap(base: *mut ffi::sqlite3_vfs) -> ffi::sqlite3_vfs {
    // SAFETY: the caller guarantees `base` is valid.
    let b = unsafe { &*base };
    ffi::sqlite3_vfs {
        iVersion: b.iVersion.min(2),
        szOsFile: (INNER_OFFSET + b.szOsFile as usize) as c_int,
        mxPathname: b.mxPathname,
        pNext: ptr::null_mut(),
        zName: NAME.as_ptr(),
        pAppData: base.cast(),
        xOpen: Some(open),
        xDelete: Some(delete),
        xAccess: Some(access),
        xFullPathname: Some(full_pathname),
        xDlOpen: Some(dl_open),
        xDlError: Some(dl_error),
        xDlSym: Some(dl_sym),
        xDlClose: Some(dl_close),
        xRandomness: Some(randomness),
        xSleep: Some(sleep),
        xCurrentTime: Some(current_time),
        xGetLastError: Some(get_last_error),
        xCurrentTimeInt64: if b.iVersion >= 2 {
            Some(current_time_int64)
        } else {
            None
        },
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }
}

/// The VFS we wrap.
///
/// SAFETY: `vfs` must be ours (built by [`wrap`]).
unsafe fn base(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: our VFS keeps the wrapped one in `pAppData`.
    unsafe { (*vfs).pAppData.cast() }
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS and a file object of our `szOsFile`
    // bytes, 8-byte aligned; the wrapped VFS's object fits at offset 0
    // and at `INNER_OFFSET`.
    unsafe {
        let base = base(vfs);
        let Some(base_open) = (*base).xOpen else {
            return ffi::SQLITE_ERROR;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Not a WAL: the default VFS's object, with its own methods,
            // is the whole file object.
            return base_open(base, name, file, flags, out_flags);
        }
        let wal = file.cast::<WalFile>();
        let inner = file.cast::<u8>().add(INNER_OFFSET).cast::<ffi::sqlite3_file>();
        (*wal).base.pMethods = ptr::null();
        let rc = base_open(base, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            // An object the default VFS half-opened is closed here: SQLite
            // will not call our `xClose`, as our methods are unset.
            if let Some(close) = (*inner).pMethods.as_ref().and_then(|m| m.xClose) {
                close(inner);
            }
            return rc;
        }
        ptr::addr_of_mut!((*wal).inner).write(inner);
        ptr::addr_of_mut!((*wal).pending).write(Pending::default());
        ptr::addr_of_mut!((*wal).sync).write(Syncer::open(name));
        (*wal).base.pMethods = &WAL_METHODS;
        ffi::SQLITE_OK
    }
}

// The VFS-level methods go to the wrapped VFS unchanged.

unsafe extern "C" fn delete(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    // SAFETY: `vfs` is ours; the wrapped VFS has every version-1 method.
    unsafe {
        let base = base(vfs);
        (*base)
            .xDelete
            .map_or(ffi::SQLITE_IOERR_DELETE, |f| f(base, name, sync_dir))
    }
}

unsafe extern "C" fn access(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, flags: c_int, out: *mut c_int) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base)
            .xAccess
            .map_or(ffi::SQLITE_IOERR_ACCESS, |f| f(base, name, flags, out))
    }
}

unsafe extern "C" fn full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base)
            .xFullPathname
            .map_or(ffi::SQLITE_ERROR, |f| f(base, name, n_out, out))
    }
}

unsafe extern "C" fn dl_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xDlOpen.map_or(ptr::null_mut(), |f| f(base, name))
    }
}

unsafe extern "C" fn dl_error(vfs: *mut ffi::sqlite3_vfs, n_byte: c_int, message: *mut c_char) {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        if let Some(f) = (*base).xDlError {
            f(base, n_byte, message);
        }
    }
}

type DlSymbol = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char);

unsafe extern "C" fn dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<DlSymbol> {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xDlSym.and_then(|f| f(base, handle, symbol))
    }
}

unsafe extern "C" fn dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        if let Some(f) = (*base).xDlClose {
            f(base, handle);
        }
    }
}

unsafe extern "C" fn randomness(vfs: *mut ffi::sqlite3_vfs, n_byte: c_int, out: *mut c_char) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xRandomness.map_or(0, |f| f(base, n_byte, out))
    }
}

unsafe extern "C" fn sleep(vfs: *mut ffi::sqlite3_vfs, microseconds: c_int) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xSleep.map_or(0, |f| f(base, microseconds))
    }
}

unsafe extern "C" fn current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xCurrentTime.map_or(ffi::SQLITE_ERROR, |f| f(base, out))
    }
}

unsafe extern "C" fn get_last_error(vfs: *mut ffi::sqlite3_vfs, n_byte: c_int, out: *mut c_char) -> c_int {
    // SAFETY: as `delete`.
    unsafe {
        let base = base(vfs);
        (*base).xGetLastError.map_or(0, |f| f(base, n_byte, out))
    }
}

unsafe extern "C" fn current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    // SAFETY: as `delete`; only set when the wrapped VFS is version 2+.
    unsafe {
        let base = base(vfs);
        (*base).xCurrentTimeInt64.map_or(ffi::SQLITE_ERROR, |f| f(base, out))
    }
}
