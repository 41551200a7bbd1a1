//! Concurrent `save_snapshot` calls: increments all land, claims have one
//! winner, creators of one id serialise, inserts of one id have one winner;
//! on one handle and across two.

use std::sync::Arc;

use chrono::Utc;
use holdpoint::session::{AuditQuery, ResumeClaim, SessionStore, SnapshotStatus};
use holdpoint::{Result, Status};
use serde_json::json;

use super::listing::{record, waiting};
use super::watch::wait_for;
use super::{claim_update, fresh_id, fresh_session, get_present, put, snapshot};
use holdpoint::session::SessionStoreExt;

/// How many tasks race in each concurrency case.
pub const RACERS: usize = 32;

fn custom_n(row: &holdpoint::session::Snapshot) -> u64 {
    row.state
        .as_ref()
        .and_then(|s| s.custom.get("n"))
        .and_then(|n| n.as_u64())
        .unwrap_or(0)
}

/// Adds one to `state.custom.n` of the row, creating the row (in `session`)
/// when it is missing.
async fn increment(store: Arc<dyn SessionStore>, id: String, session: String) -> Result<()> {
    store
        .save_snapshot(
            Some(&id),
            Box::new(move |existing| {
                let mut next = existing.cloned().unwrap_or_else(|| snapshot(&session));
                let n = custom_n(&next) + 1;
                if let Some(state) = next.state.as_mut() {
                    state.custom = json!({"n": n});
                }
                next.updated_at = Utc::now();
                Ok(Some(next))
            }),
        )
        .await
        .map(|_| ())
}

/// `RACERS` increments of one row over the given handles (round robin).
async fn race_increments(stores: &[Arc<dyn SessionStore>], id: &str, session: &str) {
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let store = stores[i % stores.len()].clone();
        tasks.push(tokio::spawn(increment(store, id.to_owned(), session.to_owned())));
    }
    for task in tasks {
        task.await.expect("increment task panicked").expect("increment failed");
    }
}

/// `RACERS` claims of one row over the given handles: exactly one wins,
/// every other gets `ABORTED`, and `resumedAt` is set.
async fn race_claims(stores: &[Arc<dyn SessionStore>], id: &str) {
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let store = stores[i % stores.len()].clone();
        let id = id.to_owned();
        tasks.push(tokio::spawn(async move {
            store.save_snapshot(Some(&id), claim_update()).await
        }));
    }
    let (mut won, mut aborted) = (0, 0);
    for task in tasks {
        match task.await.expect("claim task panicked") {
            Ok(Some(row)) => {
                assert!(row.resumed_at.is_some());
                won += 1;
            }
            Ok(None) => panic!("a claim wrote nothing without an error"),
            Err(err) if err.status() == Status::Aborted => {
                assert!(err.to_string().contains("already resumed"), "{err}");
                aborted += 1;
            }
            Err(err) => panic!("a claim failed with {}: {err}", err.status()),
        }
    }
    assert_eq!((won, aborted), (1, RACERS - 1), "claims: {won} won, {aborted} aborted");
    assert!(get_present(&*stores[0], id).await.resumed_at.is_some());
}

/// `RACERS` `insert_snapshot` calls of one fresh id over the given
/// handles, each with its own content: exactly one writes, every other
/// gets `FAILED_PRECONDITION`, and the stored row is the winner's.
async fn race_inserts(stores: &[Arc<dyn SessionStore>], id: &str, session: &str) {
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let store = stores[i % stores.len()].clone();
        let id = id.to_owned();
        let mut row = snapshot(session);
        row.state.as_mut().expect("state").custom = json!({"n": i});
        tasks.push(tokio::spawn(async move { store.insert_snapshot(&id, row).await }));
    }
    let (mut winners, mut refused) = (Vec::new(), 0);
    for task in tasks {
        match task.await.expect("insert task panicked") {
            Ok(row) => winners.push(row),
            Err(err) if err.status() == Status::FailedPrecondition => refused += 1,
            Err(err) => panic!("an insert failed with {}: {err}", err.status()),
        }
    }
    assert_eq!(
        (winners.len(), refused),
        (1, RACERS - 1),
        "inserts: {} wrote, {refused} refused",
        winners.len()
    );
    let stored = get_present(&*stores[0], id).await;
    assert_eq!(stored.snapshot_id, id);
    assert_eq!(custom_n(&stored), custom_n(&winners[0]), "the row is the winner's");
}

/// `insert_snapshot` writes a row under a new id, refuses the id once it
/// is taken (`FAILED_PRECONDITION`, the row unchanged), and `RACERS`
/// concurrent inserts of one id have one winner.
pub async fn inserts_write_an_id_once(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let id = fresh_id("insert");
    let mut first = snapshot(&session);
    first.state.as_mut().expect("state").custom = json!({"n": 1});
    let written = store.insert_snapshot(&id, first).await.expect("first insert failed");
    assert_eq!(written.snapshot_id, id);
    assert_eq!(get_present(&*store, &id).await, written);

    let mut second = snapshot(&session);
    second.state.as_mut().expect("state").custom = json!({"n": 2});
    let err = store
        .insert_snapshot(&id, second)
        .await
        .expect_err("a taken id is refused");
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert_eq!(
        get_present(&*store, &id).await,
        written,
        "a refused insert changes nothing"
    );

    race_inserts(std::slice::from_ref(&store), &fresh_id("insert-race"), &session).await;
}

/// `insert_snapshots` writes every row under its id, in order, or none:
/// one id taken (or named twice) refuses the whole batch with
/// `FAILED_PRECONDITION` and leaves the store as it was. (The trait's
/// default for stores that do not override it is weaker; every store of
/// this repository makes it one step.)
pub async fn batch_inserts_write_all_or_none(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let (a, b, c) = (fresh_id("batch-a"), fresh_id("batch-b"), fresh_id("batch-c"));
    let rows = vec![
        (a.clone(), snapshot(&session)),
        (b.clone(), snapshot(&fresh_session())),
        (c.clone(), snapshot(&session)),
    ];
    let written = store.insert_snapshots(rows).await.expect("batch insert failed");
    let ids: Vec<&str> = written.iter().map(|r| r.snapshot_id.as_str()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str(), c.as_str()], "the rows come back in order");
    for row in &written {
        assert_eq!(&get_present(&*store, &row.snapshot_id).await, row);
    }

    // One taken id in the middle: nothing of the batch is written.
    let (d, e) = (fresh_id("batch-d"), fresh_id("batch-e"));
    let mut taken = snapshot(&session);
    taken.state.as_mut().expect("state").custom = json!({"n": 9});
    let err = store
        .insert_snapshots(vec![
            (d.clone(), snapshot(&session)),
            (b.clone(), taken),
            (e.clone(), snapshot(&session)),
        ])
        .await
        .expect_err("a batch naming a taken id is refused");
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    for id in [&d, &e] {
        assert!(
            store.get_snapshot(id).await.expect("read").is_none(),
            "{id} was written"
        );
    }
    assert_eq!(get_present(&*store, &b).await, written[1], "the taken row is unchanged");

    // The same new id twice: refused whole.
    let f = fresh_id("batch-f");
    let err = store
        .insert_snapshots(vec![(f.clone(), snapshot(&session)), (f.clone(), snapshot(&session))])
        .await
        .expect_err("a batch naming one id twice is refused");
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");
    assert!(store.get_snapshot(&f).await.expect("read").is_none(), "{f} was written");
}

/// `RACERS` inserts of one id split over two handles: one winner.
pub async fn two_handles_insert_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    race_inserts(&[a, b], &fresh_id("insert-race-2"), &fresh_session()).await;
}

/// `RACERS` concurrent increments of a counter in `state.custom` all land.
pub async fn concurrent_increments_all_land(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let mut row = snapshot(&session);
    row.state.as_mut().expect("state").custom = json!({"n": 0});
    let id = put(&*store, None, row).await.snapshot_id;
    race_increments(std::slice::from_ref(&store), &id, &session).await;
    assert_eq!(custom_n(&get_present(&*store, &id).await), RACERS as u64);
}

/// `RACERS` concurrent claims of one row through the `resumedAt` pattern:
/// one wins, the rest get `ABORTED` "already resumed".
pub async fn concurrent_claims_have_one_winner(store: Arc<dyn SessionStore>) {
    let mut row = snapshot(&fresh_session());
    row.finish_reason = Some(holdpoint::FinishReason::Interrupted);
    let id = put(&*store, None, row).await.snapshot_id;
    race_claims(&[store], &id).await;
}

/// `RACERS` tasks saving one fixed, not yet existing id, each creating the
/// row when the update sees none: exactly one creates, all increments land.
pub async fn concurrent_creators_of_one_id_serialise(store: Arc<dyn SessionStore>) {
    let id = fresh_id("create-race");
    let session = fresh_session();
    race_increments(std::slice::from_ref(&store), &id, &session).await;
    assert_eq!(custom_n(&get_present(&*store, &id).await), RACERS as u64);
}

/// Rows and status changes written through one handle are seen through
/// the other: reads, latest, abort, and a watcher on the other handle.
pub async fn two_handles_see_each_other(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let saved = put(&*a, None, snapshot(&session)).await;
    assert_eq!(get_present(&*b, &saved.snapshot_id).await, saved);
    let latest = b
        .get_latest_snapshot(&session)
        .await
        .expect("latest failed")
        .expect("latest");
    assert_eq!(latest.snapshot_id, saved.snapshot_id);

    let mut row = snapshot(&session);
    row.status = SnapshotStatus::Pending;
    row.heartbeat_at = Some(Utc::now());
    let pending = put(&*b, None, row).await.snapshot_id;
    let mut watch_a = a.watch_status(&pending).await.expect("watch failed");
    wait_for(&mut watch_a, SnapshotStatus::Pending, &[]).await;
    assert_eq!(
        b.abort(&pending).await.expect("abort failed"),
        Some(SnapshotStatus::Pending)
    );
    wait_for(&mut watch_a, SnapshotStatus::Aborting, &[SnapshotStatus::Pending]).await;
    assert_eq!(get_present(&*a, &pending).await.status, SnapshotStatus::Aborting);
}

/// `RACERS` increments split over two handles all land, also when the row
/// is created by the race itself.
pub async fn two_handles_increment(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let id = put(&*a, None, snapshot(&session)).await.snapshot_id;
    race_increments(&[a.clone(), b.clone()], &id, &session).await;
    assert_eq!(custom_n(&get_present(&*b, &id).await), RACERS as u64);

    let fresh = fresh_id("create-race-2");
    race_increments(&[a.clone(), b], &fresh, &session).await;
    assert_eq!(custom_n(&get_present(&*a, &fresh).await), RACERS as u64);
}

/// `RACERS` claims of one row split over two handles: one winner.
pub async fn two_handles_claim_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let id = put(&*a, None, snapshot(&fresh_session())).await.snapshot_id;
    race_claims(&[a, b], &id).await;
}

/// `RACERS` `claim_resume` calls on one snapshot over the given handles,
/// each with its own audit record: one wins, the rest get `ABORTED`, and
/// the trail holds the winner's record only.
async fn race_claim_resumes(stores: &[Arc<dyn SessionStore>]) {
    let session = fresh_session();
    let agent = fresh_id("agent");
    let id = put(&*stores[0], None, waiting(&session)).await.snapshot_id;
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let store = stores[i % stores.len()].clone();
        let record = record(&session, &id, Some(&format!("principal-{i}")), &agent);
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = store
                .claim_resume(ResumeClaim::new(id.clone()), vec![record.clone()])
                .await;
            (record, outcome)
        }));
    }
    let mut winners = Vec::new();
    let mut aborted = 0;
    for task in tasks {
        match task.await.expect("claim task panicked") {
            (record, Ok(())) => winners.push(record),
            (_, Err(err)) if err.status() == Status::Aborted => aborted += 1,
            (_, Err(err)) => panic!("a claim failed with {}: {err}", err.status()),
        }
    }
    assert_eq!(
        (winners.len(), aborted),
        (1, RACERS - 1),
        "claims: {} won, {aborted} aborted",
        winners.len()
    );
    let trail = super::capable::audit(&*stores[0])
        .list_audit(&AuditQuery {
            session_id: Some(session),
            ..Default::default()
        })
        .await
        .expect("list_audit failed");
    assert_eq!(trail, winners, "the trail must hold exactly the winner's record");
}

/// `RACERS` concurrent `claim_resume` calls: one winner, one audit record.
pub async fn concurrent_claim_resumes_have_one_winner(store: Arc<dyn SessionStore>) {
    race_claim_resumes(&[store]).await;
}

/// `RACERS` `claim_resume` calls split over two handles: one winner, one
/// audit record.
pub async fn two_handles_claim_resume_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    race_claim_resumes(&[a, b]).await;
}
