//! [`SqliteStoreOptions`]: where the file is and how hard to push writes to disk.

use holdpoint::session::outbox::OutboxWrites;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How far SQLite goes to make a commit durable (`PRAGMA synchronous`).
///
/// Holdpoint's promise that an interrupt is announced only once its
/// snapshot is durable (docs/reference.md §7.3) holds across power loss only with
/// [`Full`](Self::Full) or [`Extra`](Self::Extra).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// No syncs: fastest; a crash of the machine can lose or corrupt data.
    Off,
    /// Syncs at WAL checkpoints only: a power loss may lose the last commits.
    Normal,
    /// Syncs each commit: a commit that returned is on disk (the default).
    #[default]
    Full,
    /// Like `Full`, and also syncs the directory after deleting a journal.
    Extra,
}

impl Synchronous {
    /// Parses `off`, `normal`, `full` or `extra` (any case).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "off" => Some(Synchronous::Off),
            "normal" => Some(Synchronous::Normal),
            "full" => Some(Synchronous::Full),
            "extra" => Some(Synchronous::Extra),
            _ => None,
        }
    }

    /// The value of `PRAGMA synchronous` for this level.
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }
}

/// How to open a [`SqliteStore`](crate::SqliteStore).
///
/// ```
/// use std::time::Duration;
/// use holdpoint_store_sqlite::{SqliteStoreOptions, Synchronous};
///
/// let options = SqliteStoreOptions::new("sessions.db")
///     .synchronous(Synchronous::Normal)
///     .busy_timeout(Duration::from_secs(2));
/// assert_eq!(options.path().to_str(), Some("sessions.db"));
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStoreOptions {
    pub(crate) path: PathBuf,
    pub(crate) synchronous: Synchronous,
    pub(crate) busy_timeout: Duration,
    pub(crate) max_connections: u32,
    pub(crate) poll_interval: Duration,
    pub(crate) outbox_writes: OutboxWrites,
}

impl SqliteStoreOptions {
    /// Options for the database file at `path` (created on first open,
    /// with its parent folders).
    pub fn new(path: impl AsRef<Path>) -> Self {
        SqliteStoreOptions {
            path: path.as_ref().to_owned(),
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(10),
            max_connections: 4,
            poll_interval: Duration::from_millis(100),
            outbox_writes: OutboxWrites::All,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Durability of commits; [`Synchronous::Full`] unless changed.
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// How long a write waits for another writer (in this process or
    /// another) to release the database before failing with
    /// `UNAVAILABLE`; 10 s unless changed.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Connections for reads (at least 1); 4 unless changed. Reads,
    /// listings and watchers' polls take an idle one (a single-row read
    /// takes the writer's connection when it is free), so up to this many
    /// reads run in parallel; writes have one connection of their own, and
    /// SQLite serialises them whatever this is.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// How often a status watcher re-reads its row, to see changes made by
    /// other processes or store handles; 100 ms unless changed. Changes made
    /// through the same handle are reported at once.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Which outbox rows this handle writes; [`OutboxWrites::All`] unless
    /// changed. A deployment with no notification channel writes only
    /// [`OutboxWrites::Timers`] (the rows that act); a handle opened later
    /// with `All` (a channel added) writes every change from then on.
    pub fn outbox_writes(mut self, writes: OutboxWrites) -> Self {
        self.outbox_writes = writes;
        self
    }
}
