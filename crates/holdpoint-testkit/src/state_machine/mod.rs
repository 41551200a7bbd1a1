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

/// Returns an error naming `what` when the store's answer and the
/// model's differ.
macro_rules! check_eq {
    ($left:expr, $right:expr, $($what:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!("{}: store gave {:?}, model expects {:?}", format!($($what)+), l, r));
        }
    }};
}

mod apply;
mod model;

use std::future::Future;
use std::sync::Arc;

use holdpoint::session::{SessionStore, SnapshotStatus};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use apply::apply;
use model::Model;

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
