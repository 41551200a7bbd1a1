//! The store's files on disk, private to their owner.
//!
//! The database holds every tool input and output, so on Unix the store
//! creates what is missing owner-only: each missing folder of the path
//! `0700`, the database file `0600`. SQLite's Unix VFS gives the `-wal`,
//! `-shm` and journal files it creates the database file's mode, so they
//! are `0600` too, whichever VFS the connections use.
//!
//! Existing files and folders keep their permissions: an operator may have
//! chosen them (a backup group, a shared volume). A database file that its
//! group or others may read or write is reported with a warning at open,
//! naming the fix (`chmod 600`). Elsewhere than Unix the platform's
//! defaults apply.

use std::io;
use std::path::Path;

/// Creates `dir` and its missing parents (each created one `0700` on
/// Unix); existing folders are left as they are.
pub(crate) fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates the database file `path`, empty (SQLite's form of a new
/// database) and `0600` on Unix, unless it exists; an existing file is not
/// touched. `:memory:` names no file.
pub(crate) fn create_database(path: &Path) -> io::Result<()> {
    if path.as_os_str().is_empty() || path.as_os_str() == ":memory:" {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        // Another handle (or process) created it first, or it was there.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The permission bits of `path` that let its group or others in, when
/// there are any (Unix only).
pub(crate) fn shared_bits(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}
