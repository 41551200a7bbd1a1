//! The in-memory store's tables and the row write every save goes
//! through (all under the store's one lock).

use std::collections::{HashMap, HashSet, VecDeque};
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
    /// Snapshot ids by session, for `get_latest_snapshot`. A packed row
    /// shares its session id with this key.
    pub(super) by_session: HashMap<Arc<str>, Vec<Arc<str>>, Hasher>,
    /// The agent names of packed rows, each kept once.
    pub(super) agents: HashSet<Arc<str>, Hasher>,
    /// The newest waiting rows saved, oldest first; a row leaving this
    /// window is packed (waiting or claimed: either way it is history by
    /// then, read rarely).
    pub(super) hot: VecDeque<Arc<str>>,
    pub(super) audit: AuditLog,
    /// The outbox, in the order written; each row boxed, so the list's
    /// spare capacity is a pointer per slot rather than a whole row (a
    /// claimed session keeps its in-doubt timer's row until it is settled).
    #[allow(clippy::vec_box, reason = "a pointer per spare slot, not a 344-byte row")]
    pub(super) outbox: Vec<Box<Queued>>,
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
            let Some(old) = self.hot.pop_front() else { break };
            let Some(Stored::Live(row)) = self.rows.get(&old) else {
                continue;
            };
            let session = session_key(&self.by_session, &row.session_id);
            let agent = agent_key(&mut self.agents, row.agent.as_deref());
            if let Some(row) = self.rows.get_mut(&old) {
                row.pack(session, agent);
            }
        }
    }

    /// Adds row `id` to its session's index; returns the index's key.
    fn index_row(&mut self, session_id: &str, id: &Arc<str>) -> Arc<str> {
        if let Some(ids) = self.by_session.get_mut(session_id) {
            // Most sessions have one or two rows (a hold, then its
            // outcome): the second slot is added alone, not four.
            if ids.len() == 1 {
                ids.reserve_exact(1);
            }
            ids.push(Arc::clone(id));
            return session_key(&self.by_session, session_id);
        }
        let key: Arc<str> = Arc::from(session_id);
        self.by_session.insert(Arc::clone(&key), vec![Arc::clone(id)]);
        key
    }
}

/// The session index's key for `session_id` (a new one when the session
/// has no row yet).
fn session_key(by_session: &HashMap<Arc<str>, Vec<Arc<str>>, Hasher>, session_id: &str) -> Arc<str> {
    match by_session.get_key_value(session_id) {
        Some((key, _)) => Arc::clone(key),
        None => Arc::from(session_id),
    }
}

/// The one copy of agent name `agent` in `agents`.
fn agent_key(agents: &mut HashSet<Arc<str>, Hasher>, agent: Option<&str>) -> Option<Arc<str>> {
    let agent = agent?;
    if let Some(key) = agents.get(agent) {
        return Some(Arc::clone(key));
    }
    let key: Arc<str> = Arc::from(agent);
    agents.insert(Arc::clone(&key));
    Some(key)
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
        let (key, session) = match self.rows.get_key_value(id).map(|(key, _)| Arc::clone(key)) {
            Some(key) => (key, session_key(&self.by_session, &row.session_id)),
            None => {
                let key: Arc<str> = Arc::from(id);
                let session = self.index_row(&row.session_id, &key);
                (key, session)
            }
        };
        let agent = agent_key(&mut self.agents, row.agent.as_deref());
        self.rows
            .insert(Arc::clone(&key), Stored::settled(&row, session, agent));
        if row.is_waiting() {
            self.keep_hot(key);
        }
        if let Some(tx) = self.watchers.get(id) {
            tx.send_replace(status);
        }
        Ok(Some(row))
    }
}
