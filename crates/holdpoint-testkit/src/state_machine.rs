//! The snapshot life cycle as a state machine, checked against a model
//! (docs/reference.md §6, §7): random sequences of saves (new and existing ids, status
//! changes, skipped and failed updates), claims, aborts, heartbeats, the
//! detached run's final write, and reads, run against a store and against
//! a plain reference model in memory, comparing every answer.
//!
//! The model's rules:
//!
//! - a save writes exactly what the update returned; a skipped or failed
//!   update writes nothing; the session id of a row never changes (a save
//!   that tries is refused and writes nothing);
//! - `claim_resume` succeeds once per row, then is `ABORTED`; concurrent
//!   claims have exactly one winner;
//! - `abort` turns `pending` (also a stale one, read as `expired`) into
//!   `aborting` and leaves every other row unchanged, returning the status
//!   it read; the final write of a detached run turns `aborting` into
//!   `aborted` (a late abort wins over completion);
//! - a heartbeat touches only pending rows;
//! - reads see a pending row with a heartbeat older than a minute as
//!   `expired`; the latest snapshot of a session is the one with the
//!   greatest `createdAt`, ties going to the greatest snapshot id.
//!
//! Use [`check`] from a plain `#[test]` (it runs its own runtime), with a
//! factory for the store under test; every case uses fresh ids, so cases
//! may share one database. [`run_ops`] runs one fixed sequence.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Duration, SubsecRound, TimeZone, Utc};
use futures::StreamExt;
use holdpoint::session::{ResumeClaim, SessionState, SessionStore, Snapshot, SnapshotStatus, mint_id};
use holdpoint::{ErrorBody, FinishReason, Status};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// How many sessions a case spreads its rows over.
const SESSIONS: u8 = 3;

/// One step of a case. Row and session numbers pick among the rows and
/// sessions the case has made so far (modulo their count).
#[derive(Debug, Clone)]
pub enum Op {
    /// Save a new row: a fixed id chosen by the caller, or one the store
    /// mints.
    Create {
        /// Which session.
        session: u8,
        /// Its status (never `expired`, which is read-only).
        status: SnapshotStatus,
        /// Seconds after a base time: few values, so ties happen.
        created: u8,
        /// A pending row whose heartbeat is ten minutes old.
        stale: bool,
        /// Whether the caller names the id.
        fixed_id: bool,
    },
    /// Save over an existing row.
    Update {
        /// Which row.
        row: u8,
        /// A new status, if any.
        status: Option<SnapshotStatus>,
        /// A new `createdAt` offset, if any.
        created: Option<u8>,
        /// Try to move the row to another session (must be refused).
        move_session: bool,
    },
    /// An update that chooses to write nothing.
    Skip {
        /// Which row.
        row: u8,
    },
    /// An update that fails.
    Fail {
        /// Which row.
        row: u8,
    },
    /// `claim_resume`.
    Claim {
        /// Which row.
        row: u8,
    },
    /// Several concurrent `claim_resume`s of one row.
    ClaimRace {
        /// Which row.
        row: u8,
    },
    /// `abort`.
    Abort {
        /// Which row.
        row: u8,
    },
    /// A detached run's heartbeat write.
    Heartbeat {
        /// Which row.
        row: u8,
    },
    /// A detached run's final write, settling the row as `status`.
    Finalize {
        /// Which row.
        row: u8,
        /// `completed` or `failed`.
        failed: bool,
    },
    /// `get_snapshot`.
    Get {
        /// Which row.
        row: u8,
    },
    /// `get_latest_snapshot`.
    Latest {
        /// Which session.
        session: u8,
    },
    /// The first value of `watch_status`.
    Watch {
        /// Which row.
        row: u8,
    },
    /// Reads, claims and aborts of an id that does not exist.
    Missing,
}

fn status() -> impl Strategy<Value = SnapshotStatus> {
    prop_oneof![
        Just(SnapshotStatus::Pending),
        Just(SnapshotStatus::Aborting),
        Just(SnapshotStatus::Completed),
        Just(SnapshotStatus::Failed),
        Just(SnapshotStatus::Aborted),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let row = any::<u8>();
    prop_oneof![
        4 => (0..SESSIONS, status(), 0u8..4, any::<bool>(), any::<bool>()).prop_map(
            |(session, status, created, stale, fixed_id)| Op::Create { session, status, created, stale, fixed_id }
        ),
        2 => (row, proptest::option::of(status()), proptest::option::of(0u8..4), proptest::bool::weighted(0.2))
            .prop_map(|(row, status, created, move_session)| Op::Update { row, status, created, move_session }),
        1 => row.prop_map(|row| Op::Skip { row }),
        1 => row.prop_map(|row| Op::Fail { row }),
        2 => row.prop_map(|row| Op::Claim { row }),
        1 => row.prop_map(|row| Op::ClaimRace { row }),
        3 => row.prop_map(|row| Op::Abort { row }),
        1 => row.prop_map(|row| Op::Heartbeat { row }),
        2 => (row, any::<bool>()).prop_map(|(row, failed)| Op::Finalize { row, failed }),
        2 => row.prop_map(|row| Op::Get { row }),
        2 => (0..SESSIONS).prop_map(|session| Op::Latest { session }),
        1 => row.prop_map(|row| Op::Watch { row }),
        1 => Just(Op::Missing),
    ]
}

/// Sequences of up to `max_len` steps.
pub fn ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..=max_len)
}

/// What the model keeps of a row, and what is compared: everything a
/// store must keep exactly (timestamps the model sets are whole seconds,
/// so stores that keep micro- or milliseconds compare equal).
#[derive(Debug, Clone, PartialEq)]
struct Row {
    id: String,
    session_id: String,
    created_at: DateTime<Utc>,
    heartbeat_at: Option<DateTime<Utc>>,
    status: SnapshotStatus,
    finish_reason: Option<FinishReason>,
    error: Option<ErrorBody>,
    resumed: bool,
    marker: i64,
}

impl Row {
    fn read_status(&self, now: DateTime<Utc>) -> SnapshotStatus {
        if self.status == SnapshotStatus::Pending
            && self
                .heartbeat_at
                .is_some_and(|h| now.signed_duration_since(h) > Duration::seconds(60))
        {
            return SnapshotStatus::Expired;
        }
        self.status
    }

    fn of(s: &Snapshot) -> Row {
        Row {
            id: s.snapshot_id.clone(),
            session_id: s.session_id.clone(),
            created_at: s.created_at,
            heartbeat_at: s.heartbeat_at,
            status: s.status,
            finish_reason: s.finish_reason,
            error: s.error.clone(),
            resumed: s.resumed_at.is_some(),
            marker: marker_of(s),
        }
    }
}

/// Each write stores a counter in the custom state, so a read shows which
/// write it sees.
fn marker_of(s: &Snapshot) -> i64 {
    s.state
        .as_ref()
        .and_then(|st| st.custom.get("marker"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(-1)
}

fn set_marker(s: &mut Snapshot, marker: i64) {
    let state = s.state.get_or_insert_with(|| SessionState::new(s.session_id.clone()));
    state.custom = serde_json::json!({ "marker": marker });
}

struct Model {
    prefix: String,
    rows: BTreeMap<String, Row>,
    order: Vec<String>,
    writes: i64,
    base: DateTime<Utc>,
}

fn now_secs() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

macro_rules! check_eq {
    ($left:expr, $right:expr, $($what:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!("{}: store gave {:?}, model expects {:?}", format!($($what)+), l, r));
        }
    }};
}

impl Model {
    fn new() -> Self {
        Model {
            prefix: mint_id(),
            rows: BTreeMap::new(),
            order: Vec::new(),
            writes: 0,
            base: Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).single().unwrap_or_default(),
        }
    }

    fn session(&self, n: u8) -> String {
        format!("{}-s{}", self.prefix, n % SESSIONS)
    }

    fn row_id(&self, n: u8) -> Option<String> {
        if self.order.is_empty() {
            return None;
        }
        Some(self.order[usize::from(n) % self.order.len()].clone())
    }

    fn next_marker(&mut self) -> i64 {
        self.writes += 1;
        self.writes
    }

    fn latest(&self, session: &str) -> Option<&Row> {
        self.rows
            .values()
            .filter(|r| r.session_id == session)
            .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
    }

    async fn compare_read(&self, store: &dyn SessionStore, id: &str) -> Result<(), String> {
        let got = store.get_snapshot(id).await.map_err(|e| format!("get {id}: {e}"))?;
        let now = Utc::now();
        match (got, self.rows.get(id)) {
            (None, None) => Ok(()),
            (Some(s), Some(row)) => {
                let mut expected = row.clone();
                expected.status = row.read_status(now);
                check_eq!(Row::of(&s), expected, "get_snapshot({id})");
                Ok(())
            }
            (got, want) => Err(format!("get_snapshot({id}): store gave {got:?}, model has {want:?}")),
        }
    }
}

/// Runs `ops` against `store` and the model; the first disagreement is the
/// error. Uses fresh ids, so the store need not be empty.
pub async fn run_ops(store: Arc<dyn SessionStore>, ops: &[Op]) -> Result<(), String> {
    let mut m = Model::new();
    for (step, op) in ops.iter().enumerate() {
        apply(&mut m, store.as_ref(), op)
            .await
            .map_err(|e| format!("step {step} {op:?}: {e}"))?;
    }
    for id in m.order.clone() {
        m.compare_read(store.as_ref(), &id).await?;
    }
    Ok(())
}

async fn apply(m: &mut Model, store: &dyn SessionStore, op: &Op) -> Result<(), String> {
    match op {
        Op::Create {
            session,
            status,
            created,
            stale,
            fixed_id,
        } => {
            let session_id = m.session(*session);
            let now = now_secs();
            let mut row = Snapshot::new(SessionState::new(session_id.clone()));
            row.created_at = m.base + Duration::seconds(i64::from(*created));
            row.updated_at = now;
            row.status = *status;
            if *status == SnapshotStatus::Pending {
                row.heartbeat_at = Some(if *stale { now - Duration::minutes(10) } else { now });
            }
            let marker = m.next_marker();
            set_marker(&mut row, marker);
            let id = fixed_id.then(|| format!("{}-n{}", m.prefix, m.writes));
            let written = row.clone();
            let saved = store
                .save_snapshot(id.as_deref(), Box::new(move |_| Ok(Some(written))))
                .await
                .map_err(|e| format!("create: {e}"))?
                .ok_or("create wrote nothing")?;
            if let Some(id) = &id {
                check_eq!(saved.snapshot_id, *id, "the caller's id");
            }
            if saved.snapshot_id.is_empty() || m.rows.contains_key(&saved.snapshot_id) {
                return Err(format!("create: bad or reused id {:?}", saved.snapshot_id));
            }
            let mut model_row = Row::of(&row);
            model_row.id = saved.snapshot_id.clone();
            check_eq!(Row::of(&saved), model_row, "the row create returned");
            m.order.push(saved.snapshot_id.clone());
            m.rows.insert(saved.snapshot_id, model_row);
        }
        Op::Update {
            row,
            status,
            created,
            move_session,
        } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let marker = m.next_marker();
            let other = format!("{}-elsewhere", m.prefix);
            let base = m.base;
            let (status, created, move_session) = (*status, *created, *move_session);
            let result = store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        let mut next = existing
                            .cloned()
                            .ok_or_else(|| holdpoint::Error::NotFound("gone".into()))?;
                        if let Some(s) = status {
                            next.status = s;
                        }
                        if let Some(c) = created {
                            next.created_at = base + Duration::seconds(i64::from(c));
                        }
                        if move_session {
                            next.session_id = other;
                        }
                        set_marker(&mut next, marker);
                        Ok(Some(next))
                    }),
                )
                .await;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            if move_session {
                if result.is_ok() {
                    return Err("a save changed a row's session id".into());
                }
            } else {
                let saved = result
                    .map_err(|e| format!("update: {e}"))?
                    .ok_or("update wrote nothing")?;
                if let Some(s) = status {
                    model_row.status = s;
                }
                if let Some(c) = created {
                    model_row.created_at = base + Duration::seconds(i64::from(c));
                }
                model_row.marker = marker;
                check_eq!(Row::of(&saved), *model_row, "the row update returned");
            }
            m.compare_read(store, &id).await?;
        }
        Op::Skip { row } | Op::Fail { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let fail = matches!(op, Op::Fail { .. });
            let result = store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |_| {
                        if fail {
                            Err(holdpoint::Error::FailedPrecondition("refused".into()))
                        } else {
                            Ok(None)
                        }
                    }),
                )
                .await;
            match (fail, result) {
                (true, Err(e)) => check_eq!(e.status(), Status::FailedPrecondition, "a failed update's error"),
                (false, Ok(None)) => {}
                (_, other) => return Err(format!("skip/fail: unexpected {other:?}")),
            }
            m.compare_read(store, &id).await?;
        }
        Op::Claim { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let result = store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()).await;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            match (model_row.resumed, result) {
                (false, Ok(())) => model_row.resumed = true,
                (true, Err(e)) => check_eq!(e.status(), Status::Aborted, "a second claim's error"),
                (was, other) => return Err(format!("claim (resumed before: {was}): {other:?}")),
            }
            m.compare_read(store, &id).await?;
        }
        Op::ClaimRace { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let claims = (0..4).map(|_| store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()));
            let results = futures::future::join_all(claims).await;
            let wins = results.iter().filter(|r| r.is_ok()).count();
            if let Some(e) = results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .find(|e| e.status() != Status::Aborted)
            {
                return Err(format!("a losing claim failed with {e}"));
            }
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            check_eq!(wins, usize::from(!model_row.resumed), "winners of concurrent claims");
            model_row.resumed = true;
            m.compare_read(store, &id).await?;
        }
        Op::Abort { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let before = Utc::now();
            let previous = store.abort(&id).await.map_err(|e| format!("abort: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            check_eq!(previous, Some(model_row.read_status(before)), "the status abort read");
            if model_row.status == SnapshotStatus::Pending {
                model_row.status = SnapshotStatus::Aborting;
            }
            m.compare_read(store, &id).await?;
        }
        Op::Heartbeat { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let at = now_secs();
            store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        Ok(existing.filter(|r| r.status == SnapshotStatus::Pending).map(|r| {
                            let mut next = r.clone();
                            next.heartbeat_at = Some(at);
                            next
                        }))
                    }),
                )
                .await
                .map_err(|e| format!("heartbeat: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            if model_row.status == SnapshotStatus::Pending {
                model_row.heartbeat_at = Some(at);
            }
            m.compare_read(store, &id).await?;
        }
        Op::Finalize { row, failed } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let at = now_secs();
            let failed = *failed;
            let (status, finish) = if failed {
                (SnapshotStatus::Failed, FinishReason::Failed)
            } else {
                (SnapshotStatus::Completed, FinishReason::Stop)
            };
            let error = failed.then(|| ErrorBody {
                status: Status::Internal,
                message: "boom".into(),
            });
            let written_error = error.clone();
            store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| {
                        let Some(row) = existing else { return Ok(None) };
                        let mut next = row.clone();
                        next.updated_at = at;
                        next.heartbeat_at = Some(at);
                        if matches!(row.status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                            next.status = SnapshotStatus::Aborted;
                            next.finish_reason = Some(FinishReason::Aborted);
                            next.error = None;
                        } else {
                            next.status = status;
                            next.finish_reason = Some(finish);
                            next.error = written_error;
                        }
                        Ok(Some(next))
                    }),
                )
                .await
                .map_err(|e| format!("finalize: {e}"))?;
            let model_row = m.rows.get_mut(&id).ok_or("model lost a row")?;
            model_row.heartbeat_at = Some(at);
            if matches!(model_row.status, SnapshotStatus::Aborting | SnapshotStatus::Aborted) {
                model_row.status = SnapshotStatus::Aborted;
                model_row.finish_reason = Some(FinishReason::Aborted);
                model_row.error = None;
            } else {
                model_row.status = status;
                model_row.finish_reason = Some(finish);
                model_row.error = error;
            }
            m.compare_read(store, &id).await?;
        }
        Op::Get { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            m.compare_read(store, &id).await?;
        }
        Op::Latest { session } => {
            let session_id = m.session(*session);
            let got = store
                .get_latest_snapshot(&session_id)
                .await
                .map_err(|e| format!("latest: {e}"))?;
            let want = m.latest(&session_id).map(|r| r.id.clone());
            check_eq!(got.map(|s| s.snapshot_id), want, "get_latest_snapshot({session_id})");
        }
        Op::Watch { row } => {
            let Some(id) = m.row_id(*row) else { return Ok(()) };
            let mut statuses = store.watch_status(&id).await.map_err(|e| format!("watch: {e}"))?;
            let first = statuses.next().await;
            let model_row = m.rows.get(&id).ok_or("model lost a row")?;
            check_eq!(
                first,
                Some(model_row.read_status(Utc::now())),
                "the first watched status"
            );
        }
        Op::Missing => {
            let id = format!("{}-missing", m.prefix);
            if store.get_snapshot(&id).await.map_err(|e| e.to_string())?.is_some() {
                return Err("a missing id reads as present".into());
            }
            check_eq!(
                store.abort(&id).await.map_err(|e| e.to_string())?,
                None,
                "abort of a missing id"
            );
            match store.claim_resume(ResumeClaim::new(id.clone()), Vec::new()).await {
                Err(e) => check_eq!(e.status(), Status::NotFound, "claim of a missing id"),
                Ok(()) => return Err("claimed a missing id".into()),
            }
            let latest = store
                .get_latest_snapshot(&format!("{}-nobody", m.prefix))
                .await
                .map_err(|e| e.to_string())?;
            check_eq!(
                latest.map(|s| s.snapshot_id),
                None::<String>,
                "latest of an unknown session"
            );
        }
    }
    Ok(())
}

/// Runs `cases` random sequences (up to 40 steps each) against stores from
/// `factory`, shrinking a failure to a short sequence; panics with it.
/// Call it from a plain `#[test]`: it runs its own runtime.
pub fn check<F, Fut>(cases: u32, factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn SessionStore>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the state machine");
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&ops(40), |ops| {
        runtime.block_on(async {
            let store = factory().await;
            run_ops(store, &ops).await.map_err(TestCaseError::fail)
        })
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, ops)) => panic!("snapshot state machine: {why}\nminimal sequence: {ops:#?}"),
        Err(TestError::Abort(why)) => panic!("snapshot state machine aborted: {why}"),
    }
}
