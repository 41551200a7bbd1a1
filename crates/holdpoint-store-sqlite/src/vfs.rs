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

/// A WAL file as SQLite sees it: our methods, then our state, then the
/// default VFS's file object (at [`INNER_OFFSET`]).
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    pending: Pending,
    sync: Syncer,
}

/// How a WAL file's syncs are made (see the module docs).
struct Syncer {
    /// A second, read-only descriptor of the WAL, for `fdatasync` (which
    /// syncs the file, whichever descriptor wrote it). `None` where
    /// every sync is SQLite's own, or when it could not be opened.
    /// Closing it cannot drop a lock of SQLite's (closing any descriptor
    /// drops the process's POSIX locks on that file): SQLite locks the
    /// database file and its WAL index, never the WAL.
    data_only: Option<std::fs::File>,
    /// Whether SQLite's own sync succeeded once (and so synced the
    /// directory of a WAL it created).
    synced_once: bool,
}

impl Syncer {
    /// The syncer of the WAL SQLite just opened at `name`.
    ///
    /// SAFETY: `name` must be null or a NUL-terminated path.
    unsafe fn open(name: ffi::sqlite3_filename) -> Self {
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
pub(crate) enum SyncKind {
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
fn count(kind: SyncKind) {
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

/// Writes held back: `bytes` belong at `offset` in the file.
#[derive(Default)]
struct Pending {
    offset: i64,
    bytes: Vec<u8>,
}

/// Where the default VFS's file object starts, 16-byte aligned.
const INNER_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(16);

/// The methods of a WAL file (version 1: SQLite maps and locks only the
/// database file and its WAL index, never the WAL itself).
static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(wal_close),
    xRead: Some(wal_read),
    xWrite: Some(wal_write),
    xTruncate: Some(wal_truncate),
    xSync: Some(wal_sync),
    xFileSize: Some(wal_file_size),
    xLock: Some(wal_lock),
    xUnlock: Some(wal_unlock),
    xCheckReservedLock: Some(wal_check_reserved_lock),
    xFileControl: Some(wal_file_control),
    xSectorSize: Some(wal_sector_size),
    xDeviceCharacteristics: Some(wal_device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

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

/// The WAL file behind `file`, and the default VFS's methods for it.
///
/// SAFETY: `file` must be a WAL file opened by [`open`] and not closed.
unsafe fn parts<'a>(file: *mut ffi::sqlite3_file) -> (&'a mut WalFile, &'a ffi::sqlite3_io_methods) {
    // SAFETY: the caller guarantees `file` is an open `WalFile`, whose
    // inner object was opened successfully and so has methods.
    unsafe {
        let wal = &mut *file.cast::<WalFile>();
        let methods = &*(*wal.inner).pMethods;
        (wal, methods)
    }
}

/// Writes the held-back bytes, if any. The buffer is emptied either way:
/// after a failed write SQLite abandons the transaction.
///
/// SAFETY: as [`parts`].
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as the caller guarantees.
    unsafe {
        let (wal, methods) = parts(file);
        if wal.pending.bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let Some(write) = methods.xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut rc = ffi::SQLITE_OK;
        let mut offset = wal.pending.offset;
        for chunk in wal.pending.bytes.chunks(MAX_WRITE) {
            // A chunk is at most MAX_WRITE bytes: it fits a c_int.
            rc = write(wal.inner, chunk.as_ptr().cast(), chunk.len() as c_int, offset);
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += chunk.len() as i64;
        }
        wal.pending.bytes.clear();
        rc
    }
}

unsafe extern "C" fn wal_write(file: *mut ffi::sqlite3_file, data: *const c_void, amount: c_int, offset: i64) -> c_int {
    // SAFETY: SQLite calls this on a file `open` set up, with `amount`
    // readable bytes at `data`.
    unsafe {
        let Ok(len) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let follows = {
            let (wal, _) = parts(file);
            !wal.pending.bytes.is_empty() && wal.pending.offset + wal.pending.bytes.len() as i64 == offset
        };
        if !follows {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            parts(file).0.pending.offset = offset;
        }
        let (wal, _) = parts(file);
        wal.pending
            .bytes
            .extend_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), len));
        if wal.pending.bytes.len() >= MAX_PENDING {
            return flush(file);
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn wal_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes each file it opened once; our state is dropped
    // here and the object is not used again.
    unsafe {
        let flushed = flush(file);
        let (wal, methods) = parts(file);
        let closed = methods.xClose.map_or(ffi::SQLITE_OK, |close| close(wal.inner));
        ptr::drop_in_place(ptr::addr_of_mut!((*file.cast::<WalFile>()).pending));
        ptr::drop_in_place(ptr::addr_of_mut!((*file.cast::<WalFile>()).sync));
        if flushed != ffi::SQLITE_OK { flushed } else { closed }
    }
}

/// Writes the held-back bytes, then does what [`forward`] does: for the
/// methods whose answer depends on what the file holds.
///
/// SAFETY: as [`parts`].
unsafe fn after_flush<M>(
    file: *mut ffi::sqlite3_file,
    pick: impl FnOnce(&ffi::sqlite3_io_methods) -> Option<M>,
    missing: c_int,
    call: impl FnOnce(M, *mut ffi::sqlite3_file) -> c_int,
) -> c_int {
    // SAFETY: as the caller guarantees.
    unsafe {
        let rc = flush(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        forward(file, pick, missing, call)
    }
}

/// Calls the wrapped file's method that `pick` names, through `call`
/// (which passes the arguments), or answers `missing` when the wrapped VFS
/// has no such method.
///
/// SAFETY: as [`parts`].
unsafe fn forward<M>(
    file: *mut ffi::sqlite3_file,
    pick: impl FnOnce(&ffi::sqlite3_io_methods) -> Option<M>,
    missing: c_int,
    call: impl FnOnce(M, *mut ffi::sqlite3_file) -> c_int,
) -> c_int {
    // SAFETY: as the caller guarantees.
    let (wal, methods) = unsafe { parts(file) };
    pick(methods).map_or(missing, |method| call(method, wal.inner))
}

// The methods below are called by SQLite on a WAL file `open` set up; each
// hands its arguments on unchanged, so the wrapped VFS's contract holds.

unsafe extern "C" fn wal_read(file: *mut ffi::sqlite3_file, buf: *mut c_void, amount: c_int, offset: i64) -> c_int {
    // SAFETY: see above.
    unsafe {
        after_flush(
            file,
            |m| m.xRead,
            ffi::SQLITE_IOERR_READ,
            |read, inner| read(inner, buf, amount, offset),
        )
    }
}

unsafe extern "C" fn wal_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: see above.
    unsafe {
        after_flush(
            file,
            |m| m.xTruncate,
            ffi::SQLITE_IOERR_TRUNCATE,
            |truncate, inner| truncate(inner, size),
        )
    }
}

unsafe extern "C" fn wal_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: see above. The held-back bytes are written before the sync.
    unsafe {
        let rc = flush(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (wal, _) = parts(file);
        if wal.sync.synced_once
            && let Some(data_only) = &wal.sync.data_only
        {
            count(SyncKind::DataOnly);
            // `sync_data` is `fdatasync` on Linux, retried when interrupted.
            return match data_only.sync_data() {
                Ok(()) => ffi::SQLITE_OK,
                Err(_) => ffi::SQLITE_IOERR_FSYNC,
            };
        }
        count(SyncKind::Sqlite);
        let rc = forward(
            file,
            |m| m.xSync,
            ffi::SQLITE_IOERR_FSYNC,
            |sync, inner| sync(inner, flags),
        );
        if rc == ffi::SQLITE_OK {
            parts(file).0.sync.synced_once = true;
        }
        rc
    }
}

unsafe extern "C" fn wal_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: see above.
    unsafe {
        after_flush(
            file,
            |m| m.xFileSize,
            ffi::SQLITE_IOERR_FSTAT,
            |file_size, inner| file_size(inner, size),
        )
    }
}

unsafe extern "C" fn wal_file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: see above. Held-back bytes are written first: a control (a
    // size hint, a sync of its own) may depend on the file's contents.
    unsafe {
        after_flush(
            file,
            |m| m.xFileControl,
            ffi::SQLITE_NOTFOUND,
            |control, inner| control(inner, op, arg),
        )
    }
}

unsafe extern "C" fn wal_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: see above.
    unsafe { forward(file, |m| m.xLock, ffi::SQLITE_OK, |lock, inner| lock(inner, level)) }
}

unsafe extern "C" fn wal_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: see above.
    unsafe {
        forward(
            file,
            |m| m.xUnlock,
            ffi::SQLITE_OK,
            |unlock, inner| unlock(inner, level),
        )
    }
}

unsafe extern "C" fn wal_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: see above; `out` is writable.
    unsafe {
        let (wal, methods) = parts(file);
        match methods.xCheckReservedLock {
            Some(check) => check(wal.inner, out),
            None => {
                *out = 0;
                ffi::SQLITE_OK
            }
        }
    }
}

unsafe extern "C" fn wal_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: see above.
    unsafe { forward(file, |m| m.xSectorSize, 4096, |sector_size, inner| sector_size(inner)) }
}

unsafe extern "C" fn wal_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: see above.
    unsafe {
        forward(
            file,
            |m| m.xDeviceCharacteristics,
            0,
            |characteristics, inner| characteristics(inner),
        )
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

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OpenFlags};

    use super::*;

    fn open(path: &std::path::Path) -> Connection {
        register().unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = Connection::open_with_flags_and_vfs(path, flags, NAME).unwrap();
        conn.pragma_update_and_check(None, "journal_mode", "wal", |r| r.get::<_, String>(0))
            .unwrap();
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        conn
    }

    /// A connection on the default VFS, as another process would read.
    fn plain(path: &std::path::Path) -> Connection {
        Connection::open(path).unwrap()
    }

    #[test]
    fn every_commit_is_readable_by_a_connection_on_the_default_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.db");
        let writer = open(&path);
        writer
            .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)", [])
            .unwrap();
        let reader = plain(&path);
        for k in 0..300i64 {
            let value = format!("{k}-{}", "x".repeat((k as usize * 37) % 3000));
            writer
                .execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, &value))
                .unwrap();
            let read: String = reader
                .query_row("SELECT v FROM t WHERE k = ?1", [k], |r| r.get(0))
                .unwrap();
            assert_eq!(read, value);
        }
        let check: String = reader.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// Row `k`'s value: 1 KiB of one nonzero byte that depends on `k`.
    fn byte_row(k: i64) -> Vec<u8> {
        vec![(k % 250 + 1) as u8; 1024]
    }

    #[test]
    fn a_transaction_larger_than_the_cache_and_the_buffer_reads_its_own_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.db");
        let mut writer = open(&path);
        // A tiny page cache makes SQLite spill pages to the WAL mid
        // transaction, read them back and write some of them again.
        writer.pragma_update(None, "cache_size", 8).unwrap();
        writer
            .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)", [])
            .unwrap();
        let tx = writer.transaction().unwrap();
        // 3 MiB: more than MAX_PENDING, written in several MAX_WRITE chunks.
        for k in 0..3000i64 {
            tx.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, byte_row(k)))
                .unwrap();
        }
        tx.execute("UPDATE t SET v = zeroblob(1024) WHERE k % 3 = 0", [])
            .unwrap();
        // Read back inside the transaction: spilled pages come from the WAL.
        let mut stmt = tx.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
        let rows: Vec<(i64, Vec<u8>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        drop(stmt);
        assert_eq!(rows.len(), 3000);
        for (k, v) in &rows {
            let expected = if k % 3 == 0 { vec![0; 1024] } else { byte_row(*k) };
            assert_eq!(v, &expected, "row {k}");
        }
        tx.commit().unwrap();
        drop(writer);
        let reader = plain(&path);
        let (n, zeros): (i64, i64) = reader
            .query_row("SELECT count(*), sum(v = zeroblob(1024)) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((n, zeros), (3000, 1000));
        let last: Vec<u8> = reader
            .query_row("SELECT v FROM t WHERE k = 2999", [], |r| r.get(0))
            .unwrap();
        assert_eq!(last, byte_row(2999));
        let check: String = reader.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    /// Every commit after a WAL's first sync is `fdatasync` on Linux, whatever
    /// SQLite was compiled with; the first is SQLite's own (it syncs the
    /// directory of a new WAL). Elsewhere every sync is SQLite's own.
    #[test]
    fn commits_sync_the_wal_with_fdatasync_after_sqlites_first_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.db");
        take_syncs();
        let writer = open(&path);
        writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)", []).unwrap();
        // A new WAL's first commit syncs its header, then its frames.
        let [sqlite, _] = take_syncs();
        assert_eq!(sqlite, 1, "the WAL's first sync is SQLite's own");
        for k in 0..10i64 {
            writer.execute("INSERT INTO t (k) VALUES (?1)", [k]).unwrap();
        }
        let [sqlite, later] = take_syncs();
        if cfg!(target_os = "linux") {
            assert_eq!(sqlite, 0);
            assert!(later >= 10, "one fdatasync per commit at least, got {later}");
        } else {
            assert_eq!(later, 0);
            assert!(sqlite >= 10);
        }
        // A second connection syncs its own WAL handle: SQLite's first.
        let other = open(&path);
        other.execute("INSERT INTO t (k) VALUES (100)", []).unwrap();
        other.execute("INSERT INTO t (k) VALUES (101)", []).unwrap();
        let [sqlite, data_only] = take_syncs();
        assert_eq!(sqlite, 1);
        assert_eq!(data_only >= 1, cfg!(target_os = "linux"), "{data_only}");
        let n: i64 = plain(&path)
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 12);
    }

    #[test]
    fn a_checkpoint_and_a_reopen_keep_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.db");
        let writer = open(&path);
        writer.pragma_update(None, "wal_autocheckpoint", 20).unwrap();
        writer
            .execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)", [])
            .unwrap();
        for k in 0..500i64 {
            writer
                .execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (k, "y".repeat(900)))
                .unwrap();
        }
        drop(writer);
        let again = open(&path);
        let n: i64 = again.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 500);
        let check: String = again.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }
}
