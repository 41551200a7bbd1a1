//! `InMemoryStore`: a session store in process memory, for tests and demos.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use chrono::{DateTime, Utc};

use super::audit::AuditRecord;
use super::claim::{ResumeClaim, apply_claim_to};
use super::listing::filter_snapshots;
mod prune;

use super::outbox::{
    OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, apply_outcome, apply_retry, decided_events, hold_events,
    lease_lost,
};
use super::prune::{PruneOutcome, PruneRequest};
use super::query::{AuditQuery, SnapshotQuery};
use super::snapshot::{Snapshot, SnapshotStatus};
use super::store::{SessionStore, SnapshotUpdate, WaitingCount};
use super::write::{mint_id, prepare_row};
use crate::error::{Error, Result};
use crate::message::{Message, Part, PartKind, metadata};

/// One stored row.
enum Stored {
    /// The row as saved.
    Live(Box<Snapshot>),
    /// A row saved waiting for an answer (still waiting, or claimed since)
    /// that left the window of the newest ([`HOT_WAITING`]), kept as its
    /// JSON text: a paused session may wait
    /// for days, and the text is a fraction of the decoded tree (one
    /// allocation instead of dozens). A claim sets `resumed_at` here,
    /// without decoding; reads decode a copy.
    Packed {
        created_at: DateTime<Utc>,
        /// The agent that wrote it, for counting without decoding.
        agent: Option<Box<str>>,
        resumed_at: Option<DateTime<Utc>>,
        resume_lease_until: Option<DateTime<Utc>>,
        json: Box<str>,
    },
}

impl Stored {
    /// Packs a live row saved waiting for an answer — still waiting, or
    /// claimed since — that decodes back to itself; leaves any other row
    /// as it is.
    fn pack(&mut self) {
        let Stored::Live(row) = self else { return };
        let answered = row.status == SnapshotStatus::Completed && row.resumed_at.is_some();
        if !(row.is_waiting() || answered) || !decodes_back(row) {
            return;
        }
        if let Ok(json) = serde_json::to_string(row) {
            *self = Stored::Packed {
                created_at: row.created_at,
                agent: row.agent.as_deref().map(Box::from),
                resumed_at: row.resumed_at,
                resume_lease_until: row.resume_lease_until,
                json: json.into_boxed_str(),
            };
        }
    }

    fn created_at(&self) -> DateTime<Utc> {
        match self {
            Stored::Live(row) => row.created_at,
            Stored::Packed { created_at, .. } => *created_at,
        }
    }

    /// Whether the row waits for an answer (a packed row was saved
    /// waiting; a claim since sets its `resumed_at`) and was written by
    /// `agent` when one is given.
    fn waits_for(&self, agent: Option<&str>) -> bool {
        match self {
            Stored::Live(row) => row.is_waiting() && agent.is_none_or(|a| row.agent.as_deref() == Some(a)),
            Stored::Packed {
                agent: written_by,
                resumed_at,
                ..
            } => resumed_at.is_none() && agent.is_none_or(|a| written_by.as_deref() == Some(a)),
        }
    }

    /// The status as read now (a packed row was saved completed).
    fn read_status(&self) -> SnapshotStatus {
        match self {
            Stored::Live(row) => row.as_read_status(),
            Stored::Packed { .. } => SnapshotStatus::Completed,
        }
    }

    /// A copy of the row.
    fn to_snapshot(&self, id: &str) -> Result<Snapshot> {
        match self {
            Stored::Live(row) => Ok((**row).clone()),
            Stored::Packed {
                resumed_at,
                resume_lease_until,
                json,
                ..
            } => {
                let mut row: Snapshot = serde_json::from_str(json)
                    .map_err(|e| Error::Internal(format!("stored snapshot {id} does not decode: {e}")))?;
                if resumed_at.is_some() {
                    row.resumed_at = *resumed_at;
                    row.resume_lease_until = *resume_lease_until;
                }
                Ok(row)
            }
        }
    }

    /// Applies a resume's claim (the exactly-once mark, docs/reference.md §7, and its
    /// lease, §8) in place, without decoding a packed row.
    fn claim(&mut self, claim: &ResumeClaim) -> Result<()> {
        match self {
            Stored::Live(row) => apply_claim_to(&mut row.resumed_at, &mut row.resume_lease_until, claim),
            Stored::Packed {
                resumed_at,
                resume_lease_until,
                ..
            } => apply_claim_to(resumed_at, resume_lease_until, claim),
        }
    }
}

/// Whether `row`'s JSON decodes to `row` again: every part's interrupt
/// markers are well formed (decoding checks them). Rows that fail this
/// stay as saved.
fn decodes_back(row: &Snapshot) -> bool {
    fn part_ok(part: &Part) -> bool {
        part.metadata.as_ref().is_none_or(|m| metadata::validate(m).is_ok())
            && match &part.kind {
                PartKind::ToolResponse(r) => r.content.as_ref().is_none_or(|c| c.iter().all(part_ok)),
                _ => true,
            }
    }
    let message_ok = |m: &Message| m.content.iter().all(part_ok);
    row.state
        .as_ref()
        .is_none_or(|s| s.messages.iter().all(message_ok) && s.artifacts.iter().all(|a| a.parts.iter().all(part_ok)))
}

/// How many of the newest waiting rows stay decoded. A call answered soon
/// after it paused is read back without decoding; older waiting rows are
/// packed, so a store holding many paused sessions keeps them small.
const HOT_WAITING: usize = 256;

/// The maps' hasher: seeded per process, much faster than SipHash on the
/// short id keys.
type Hasher = foldhash::fast::RandomState;

/// The rows. A row is boxed or packed (the table holds a pointer per slot,
/// not a whole `Snapshot`) and its id is shared by the table and the
/// session index: what a paused session costs is mostly its own data.
#[derive(Default)]
struct Rows {
    rows: HashMap<Arc<str>, Stored, Hasher>,
    /// Snapshot ids by session, for `get_latest_snapshot`.
    by_session: HashMap<String, Vec<Arc<str>>, Hasher>,
    /// The newest waiting rows saved, oldest first; a row leaving this
    /// window is packed (waiting or claimed: either way it is history by
    /// then, read rarely).
    hot: VecDeque<Arc<str>>,
    audit: Vec<AuditRecord>,
    /// The outbox, in the order written; each row with the token of its
    /// current claim.
    outbox: Vec<(OutboxEvent, Option<String>)>,
    watchers: HashMap<String, watch::Sender<SnapshotStatus>, Hasher>,
}

impl Rows {
    /// Notes that row `id` was saved waiting; packs the row that leaves the
    /// window of decoded waiting rows.
    fn keep_hot(&mut self, id: Arc<str>) {
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

/// A [`SessionStore`] in memory: fast, shared by clones, gone with the
/// process.
///
/// ```
/// use holdpoint::session::{InMemoryStore, SessionStore, Snapshot, SessionState};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = InMemoryStore::new();
/// let saved = store
///     .save_snapshot(None, Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s1"))))))
///     .await?
///     .expect("written");
/// let read = store.get_snapshot(&saved.snapshot_id).await?.expect("present");
/// assert_eq!(read.session_id, "s1");
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct InMemoryStore {
    inner: Arc<Mutex<Rows>>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Rows> {
        // Every critical section leaves the maps consistent, so a poisoned
        // lock (a panicking test thread) is safe to keep using.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many snapshots the store holds.
    pub fn len(&self) -> usize {
        self.lock().rows.len()
    }

    /// Whether the store holds no snapshot.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl SessionStore for InMemoryStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "get_snapshot", store = "memory", snapshot_id = snapshot_id), err(Display))]
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        let rows = self.lock();
        match rows.rows.get(snapshot_id) {
            Some(row) => Ok(Some(row.to_snapshot(snapshot_id)?.as_read())),
            None => Ok(None),
        }
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "memory", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let rows = self.lock();
        let Some(ids) = rows.by_session.get(session_id) else {
            return Ok(None);
        };
        // The greatest (createdAt, snapshotId).
        let latest = ids
            .iter()
            .filter_map(|id| rows.rows.get(id).map(|row| (row.created_at(), id, row)))
            .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        match latest {
            Some((_, id, row)) => Ok(Some(row.to_snapshot(id)?.as_read())),
            None => Ok(None),
        }
    }

    /// Counts from the session index, decoding nothing: the latest row of
    /// each session, when it waits.
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        let rows = self.lock();
        let mut count = WaitingCount::default();
        for ids in rows.by_session.values() {
            let latest = ids
                .iter()
                .filter_map(|id| rows.rows.get(id).map(|row| (row.created_at(), id, row)))
                .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            if let Some((created_at, _, row)) = latest
                && row.waits_for(agent)
            {
                count.count += 1;
                count.oldest = Some(count.oldest.map_or(created_at, |o| o.min(created_at)));
            }
        }
        Ok(count)
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot", store = "memory", snapshot_id = snapshot_id.unwrap_or_default()), err(Display))]
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let id = match snapshot_id {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => mint_id(),
        };
        tracing::Span::current().record("snapshot_id", id.as_str());
        let mut rows = self.lock();
        let decoded;
        let existing = match rows.rows.get(id.as_str()) {
            None => None,
            Some(Stored::Live(row)) => Some(&**row),
            Some(packed) => {
                decoded = packed.to_snapshot(&id)?;
                Some(&decoded)
            }
        };
        let was_waiting = existing.is_some_and(Snapshot::is_waiting);
        let Some(next) = update(existing)? else {
            return Ok(None);
        };
        let row = prepare_row(&id, existing, next)?;
        // The events of a new hold, under the same lock as the row.
        let events = hold_events(was_waiting, &row);
        rows.outbox.extend(events.into_iter().map(|e| (e, None)));
        let status = row.as_read_status();
        let stored = Stored::Live(Box::new(row.clone()));
        let key = match rows.rows.get_key_value(id.as_str()).map(|(key, _)| Arc::clone(key)) {
            Some(key) => {
                rows.rows.insert(Arc::clone(&key), stored);
                key
            }
            None => {
                let key: Arc<str> = Arc::from(id.as_str());
                rows.by_session
                    .entry(row.session_id.clone())
                    .or_insert_with(|| Vec::with_capacity(1))
                    .push(Arc::clone(&key));
                rows.rows.insert(Arc::clone(&key), stored);
                key
            }
        };
        if row.is_waiting() {
            rows.keep_hot(key);
        }
        if let Some(tx) = rows.watchers.get(&id) {
            tx.send_replace(status);
        }
        Ok(Some(row))
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "memory"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        let rows = self.lock();
        let mut live: Vec<&Snapshot> = Vec::with_capacity(rows.rows.len());
        let mut unpacked: Vec<Snapshot> = Vec::new();
        for (id, row) in &rows.rows {
            match row {
                Stored::Live(row) => live.push(row),
                packed => unpacked.push(packed.to_snapshot(id)?),
            }
        }
        Ok(filter_snapshots(live.into_iter().chain(&unpacked), query))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "append_audit", store = "memory", records = records.len()), err(Display))]
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        self.lock().audit.extend(records);
        Ok(())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_audit", store = "memory"), err(Display))]
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let rows = self.lock();
        Ok(rows
            .audit
            .iter()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.limit())
            .cloned()
            .collect())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "memory", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let mut rows = self.lock();
        // The claim of `claim_update`, in place: the row is not copied.
        let Some(stored) = rows.rows.get_mut(claim.snapshot_id.as_str()) else {
            return Err(Error::NotFound(format!("snapshot {} not found", claim.snapshot_id)));
        };
        stored.claim(&claim)?;
        let events = decided_events(&claim.snapshot_id, claim.lease_until, &audit);
        rows.outbox.extend(events.into_iter().map(|e| (e, None)));
        rows.audit.extend(audit);
        Ok(())
    }

    async fn claim_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
        lease: std::time::Duration,
    ) -> Result<Vec<OutboxLease>> {
        let mut rows = self.lock();
        let mut due: Vec<usize> = (0..rows.outbox.len())
            .filter(|&i| rows.outbox[i].0.claimable(now))
            .collect();
        due.sort_by_key(|&i| rows.outbox[i].0.due_at);
        due.truncate(limit);
        let until = super::claim::lease_end(now, lease);
        let mut out = Vec::with_capacity(due.len());
        for i in due {
            let token = mint_id();
            let (event, held) = &mut rows.outbox[i];
            event.lease_until = Some(until);
            event.attempts = event.attempts.saturating_add(1);
            *held = Some(token.clone());
            out.push(OutboxLease {
                event: event.clone(),
                token,
            });
        }
        Ok(out)
    }

    async fn settle_outbox(&self, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
        let mut rows = self.lock();
        let Some((event, held)) = rows.outbox.iter_mut().find(|(e, _)| e.id == id) else {
            return Err(Error::NotFound(format!("outbox event {id} not found")));
        };
        if held.as_deref() != Some(token) {
            return Err(lease_lost(id));
        }
        *held = None;
        apply_outcome(event, outcome);
        Ok(())
    }

    async fn enqueue_outbox(&self, events: Vec<OutboxEvent>) -> Result<()> {
        self.lock().outbox.extend(events.into_iter().map(|e| (e, None)));
        Ok(())
    }

    async fn list_outbox(&self, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
        let rows = self.lock();
        let mut out: Vec<OutboxEvent> = rows
            .outbox
            .iter()
            .map(|(e, _)| e)
            .filter(|e| query.matches(e))
            .cloned()
            .collect();
        out.sort_by_key(|e| e.due_at);
        out.truncate(query.limit());
        Ok(out)
    }

    async fn retry_outbox(&self, id: &str) -> Result<Option<OutboxEvent>> {
        let mut rows = self.lock();
        let Some((event, held)) = rows.outbox.iter_mut().find(|(e, _)| e.id == id) else {
            return Ok(None);
        };
        *held = None;
        apply_retry(event, Utc::now());
        Ok(Some(event.clone()))
    }

    async fn prune_sessions(&self, request: &PruneRequest) -> Result<PruneOutcome> {
        self.lock().prune(request)
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "memory", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        let mut rows = self.lock();
        let Some(current) = rows.rows.get(snapshot_id).map(Stored::read_status) else {
            return Ok(futures::stream::empty().boxed());
        };
        let rx = match rows.watchers.get(snapshot_id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(current);
                rows.watchers.insert(snapshot_id.to_owned(), tx);
                rx
            }
        };
        // The first item is the status as read now (a stale pending row
        // reads as expired), whatever the channel last carried.
        Ok(futures::stream::once(async move { current })
            .chain(WatchStream::from_changes(rx))
            .boxed())
    }
}

trait ReadStatus {
    fn as_read_status(&self) -> SnapshotStatus;
}

impl ReadStatus for Snapshot {
    fn as_read_status(&self) -> SnapshotStatus {
        self.read_status(chrono::Utc::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, Part, Role};
    use crate::model::FinishReason;
    use crate::session::SessionState;
    use serde_json::json;

    fn waiting(interrupt: serde_json::Value) -> Snapshot {
        let mut paused = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 0.1 + 0.2})));
        paused.set_meta(metadata::INTERRUPT, interrupt);
        let mut state = SessionState::new("s1");
        state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![paused])];
        let mut row = Snapshot::new(state);
        row.finish_reason = Some(FinishReason::Interrupted);
        row
    }

    async fn save(store: &InMemoryStore, row: Snapshot) -> Snapshot {
        store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await
            .unwrap()
            .unwrap()
    }

    fn is_packed(store: &InMemoryStore, id: &str) -> bool {
        matches!(store.lock().rows.get(id), Some(Stored::Packed { .. }))
    }

    /// Saves enough newer waiting rows (of another session) that every
    /// waiting row saved before leaves the decoded window.
    async fn push_out_of_window(store: &InMemoryStore) {
        for _ in 0..HOT_WAITING {
            let mut row = waiting(json!(true));
            row.session_id = "other".into();
            save(store, row).await;
        }
    }

    #[tokio::test]
    async fn the_newest_waiting_rows_stay_decoded_and_older_ones_are_packed() {
        let store = InMemoryStore::new();
        let first = save(&store, waiting(json!(true))).await;
        assert!(!is_packed(&store, &first.snapshot_id));
        push_out_of_window(&store).await;
        assert!(is_packed(&store, &first.snapshot_id));
        assert_eq!(store.len(), HOT_WAITING + 1);
        let packed = store
            .lock()
            .rows
            .values()
            .filter(|r| matches!(r, Stored::Packed { .. }))
            .count();
        assert_eq!(packed, 1, "only the row that left the window is packed");
        assert_eq!(store.get_snapshot(&first.snapshot_id).await.unwrap(), Some(first));
    }

    #[tokio::test]
    async fn packed_waiting_rows_are_counted_by_agent_without_decoding() {
        let store = InMemoryStore::new();
        let mut teller = Vec::new();
        for n in 0..3 {
            let mut row = waiting(json!(true));
            row.session_id = format!("teller-{n}");
            row.agent = Some("teller".into());
            teller.push(save(&store, row).await);
        }
        push_out_of_window(&store).await;
        assert!(teller.iter().all(|row| is_packed(&store, &row.snapshot_id)));
        // A claim on a packed row: no longer waiting.
        let claim = ResumeClaim::new(teller[0].snapshot_id.clone());
        store.claim_resume(claim, Vec::new()).await.unwrap();
        let count = store.count_waiting(Some("teller")).await.unwrap();
        assert_eq!(count.count, 2);
        assert_eq!(count.oldest, teller[1..].iter().map(|r| r.created_at).min());
        // The `push_out_of_window` rows share one session: one more waiting.
        assert_eq!(store.count_waiting(None).await.unwrap().count, 3);
        assert_eq!(store.count_waiting(Some("nobody")).await.unwrap().count, 0);
    }

    #[tokio::test]
    async fn a_row_claimed_in_the_window_is_packed_with_its_claim() {
        let store = InMemoryStore::new();
        let saved = save(&store, waiting(json!(true))).await;
        let claim = ResumeClaim::new(saved.snapshot_id.clone());
        let lease_until = claim.lease_until;
        store.claim_resume(claim, Vec::new()).await.unwrap();
        let claimed = store.get_snapshot(&saved.snapshot_id).await.unwrap().unwrap();
        assert!(!is_packed(&store, &saved.snapshot_id));
        push_out_of_window(&store).await;
        assert!(is_packed(&store, &saved.snapshot_id));
        let read = store.get_snapshot(&saved.snapshot_id).await.unwrap().unwrap();
        assert_eq!(read, claimed);
        assert_eq!(read.resume_lease_until, Some(lease_until));
        // Still claimed once: a second claim of the packed row is refused.
        let again = store
            .claim_resume(ResumeClaim::new(saved.snapshot_id.clone()), Vec::new())
            .await
            .unwrap_err();
        assert!(matches!(again, Error::AlreadyResumed(_)), "{again}");
    }

    #[tokio::test]
    async fn a_finished_row_stays_decoded() {
        let store = InMemoryStore::new();
        let mut row = waiting(json!(true));
        row.finish_reason = Some(FinishReason::Stop);
        let saved = save(&store, row).await;
        push_out_of_window(&store).await;
        assert!(!is_packed(&store, &saved.snapshot_id));
    }

    #[tokio::test]
    async fn a_waiting_row_is_packed_and_reads_back_equal() {
        let store = InMemoryStore::new();
        let saved = save(&store, waiting(json!({"details": "pay 0.30000000000000004"}))).await;
        push_out_of_window(&store).await;
        assert!(is_packed(&store, &saved.snapshot_id));
        assert_eq!(
            store.get_snapshot(&saved.snapshot_id).await.unwrap(),
            Some(saved.clone())
        );
        assert_eq!(store.get_latest_snapshot("s1").await.unwrap(), Some(saved.clone()));
        let listed = store
            .list_snapshots(&SnapshotQuery {
                session_id: Some("s1".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed, vec![saved]);
    }

    #[tokio::test]
    async fn a_packed_row_is_claimed_once_and_reads_back_claimed() {
        let store = InMemoryStore::new();
        let saved = save(&store, waiting(json!(true))).await;
        push_out_of_window(&store).await;
        let id = saved.snapshot_id.clone();
        assert!(is_packed(&store, &id));
        store
            .claim_resume(ResumeClaim::new(id.clone()), Vec::new())
            .await
            .unwrap();
        let err = store
            .claim_resume(ResumeClaim::new(id.clone()), Vec::new())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyResumed(_)), "{err}");
        let read = store.get_snapshot(&id).await.unwrap().unwrap();
        assert!(read.resumed_at.is_some());
        assert!(!read.is_waiting());
        assert_eq!(read.state, saved.state);
        // An update of the claimed row sees the claim.
        let seen = store
            .save_snapshot(Some(&id), Box::new(|row| Ok(row.cloned())))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen.resumed_at, read.resumed_at);
    }

    #[tokio::test]
    async fn a_row_whose_json_would_not_decode_stays_as_saved() {
        let store = InMemoryStore::new();
        // A malformed interrupt marker: decoding a part refuses it.
        let saved = save(&store, waiting(json!(5))).await;
        push_out_of_window(&store).await;
        assert!(!is_packed(&store, &saved.snapshot_id));
        assert_eq!(store.get_snapshot(&saved.snapshot_id).await.unwrap(), Some(saved));
    }
}
