//! A WAL file's methods: writes that follow one another are held back and
//! handed to the wrapped VFS as one block (see the [module docs](super)).

use std::ffi::{c_int, c_void};
use std::ptr;

use rusqlite::ffi;

use super::sync::{SyncKind, Syncer, count};
use super::{MAX_PENDING, MAX_WRITE};

/// A WAL file as SQLite sees it: our methods, then our state, then the
/// default VFS's file object (at [`INNER_OFFSET`]).
#[repr(C)]
pub(super) struct WalFile {
    pub(super) base: ffi::sqlite3_file,
    pub(super) inner: *mut ffi::sqlite3_file,
    pub(super) pending: Pending,
    pub(super) sync: Syncer,
}

/// Writes held back: `bytes` belong at `offset` in the file.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) offset: i64,
    pub(super) bytes: Vec<u8>,
}

/// Where the default VFS's file object starts, 16-byte aligned.
pub(super) const INNER_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(16);

/// The methods of a WAL file (version 1: SQLite maps and locks only the
/// database file and its WAL index, never the WAL itself).
pub(super) static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
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
