//! The in-memory store's tables and the row write every save goes
//! through (all under the store's one lock).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::watch;

use super::audit::AuditLog;
use super::outbox::Queued;
use super::stored::{ReadStatus, Stored};
use crate::error::Result;
use crate::hold::Grant;
use crate::session::outbox::OutboxWrites;
use crate::session::snapshot::SnapshotUpdate;
use crate::session::snapshot::{Snapshot, SnapshotStatus};
use crate::session::write::prepare_row;

/// How many of the newest waiting rows stay decoded. A call answered soon
/// after it paused is read back without decoding; older waiting rows are
/// packed, so a store holding many paused sessions keeps them small.
pub(super) const HOT_WAITING: usize = 256;

/// The maps' hasher: seeded per process, much faster than SipHash on the
/// short id keys.
type Hasher = foldhash::fast::RandomState;

/// The rows. A row is boxed or packed (the table holds a pointer per slot,
/// not a whole `Snapshot`) and its id is shared by the table and the
/// session index: what a paused session costs is mostly its own data.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) rows: HashMap<Arc<str>, Stored, Hasher>,
    /// Snapshot ids by session, for `get_latest_snapshot`.
    pub(super) by_session: HashMap<String, Vec<Arc<str>>, Hasher>,
    /// The newest waiting rows saved, oldest first; a row leaving this
    /// window is packed (waiting or claimed: either way it is history by
    /// then, read rarely).
    pub(super) hot: VecDeque<Arc<str>>,
    pub(super) audit: AuditLog,
    /// The outbox, in the order written.
    pub(super) outbox: Vec<Queued>,
    /// Which outbox rows the writes make.
    pub(super) writes: OutboxWrites,
    /// Endpoints stopped for good (HTTP 410), by channel.
    pub(super) stopped: Vec<crate::session::EndpointStop>,
    pub(super) watchers: HashMap<String, watch::Sender<SnapshotStatus>, Hasher>,
    /// Standing grants, in the order written.
    pub(super) grants: Vec<Grant>,
}

impl Rows {
    /// Notes that row `id` was saved waiting; packs the row that leaves the
    /// window of decoded waiting rows.
    pub(super) fn keep_hot(&mut self, id: Arc<str>) {
        self.hot.push_back(id);
        while self.hot.len() > HOT_WAITING {
            if let Some(old) = self.hot.pop_front()
                && let Some(row) = self.rows.get_mut(&old)
            {
                row.pack();
            }
        }
    }
}

impl Rows {
    /// Runs `update` on row `id` and writes what it returns (see
    /// `SessionStore::save_snapshot`): the row, its hold's outbox events
    /// and the status its watchers hear, together under the caller's lock.
    pub(super) fn save(&mut self, id: &str, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let decoded;
        let existing = match self.rows.get(id) {
            None => None,
            Some(Stored::Live(row)) => Some(&**row),
            Some(packed) => {
                decoded = packed.to_snapshot(id)?;
                Some(&decoded)
            }
        };
        let was_waiting = existing.is_some_and(Snapshot::is_waiting);
        let rewrite = existing.is_some();
        let Some(next) = update(existing)? else {
            return Ok(None);
        };
        let row = prepare_row(id, existing, next)?;
        if rewrite {
            self.freeze_payloads(id);
        }
        // The events of a new hold, under the same lock as the row.
        self.queue_hold(was_waiting, &row);
        let status = row.as_read_status();
        let stored = Stored::Live(Box::new(row.clone()));
        let key = match self.rows.get_key_value(id).map(|(key, _)| Arc::clone(key)) {
            Some(key) => {
                self.rows.insert(Arc::clone(&key), stored);
                key
            }
            None => {
                let key: Arc<str> = Arc::from(id);
                self.by_session
                    .entry(row.session_id.clone())
                    .or_insert_with(|| Vec::with_capacity(1))
                    .push(Arc::clone(&key));
                self.rows.insert(Arc::clone(&key), stored);
                key
            }
        };
        if row.is_waiting() {
            self.keep_hot(key);
        }
        if let Some(tx) = self.watchers.get(id) {
            tx.send_replace(status);
        }
        Ok(Some(row))
    }
}
