//! The outbox (docs/reference.md §11.3): events written with the change they
//! report, claims under a lease that one handle holds at a time, settles
//! that need the claim, and timers that fall due once.
//!
//! Cases may share a database with other cases, whose holds write outbox
//! rows too: every check looks only at the rows of its own snapshots, and
//! claims pass `now` explicitly (so a timer "falls due" without waiting).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use holdpoint::message::metadata;
use holdpoint::session::outbox::{HOLD_CREATED, HOLD_DECIDED, HOLD_EXPIRED, HOLD_IN_DOUBT, HOLD_REMINDED, REMIND_AT};
use holdpoint::session::{
    OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxState, ResumeClaim, SessionState, SessionStore,
    Snapshot,
};
use holdpoint::{FinishReason, Message, Part, Role, Status};
use serde_json::{Value, json};

use super::capable::outbox;
use super::{approve_record, fresh_id, fresh_session, put};

/// A snapshot of `session` waiting on one held `transferMoney` call (ref
/// `r1`) whose interrupt data is `interrupt`.
pub(super) fn held(session: &str, interrupt: Value) -> Snapshot {
    let mut call = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 50000})));
    call.set_meta(metadata::INTERRUPT, interrupt);
    let mut state = SessionState::new(session);
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![call])];
    let mut row = Snapshot::new(state);
    row.agent = Some("bank".into());
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

pub(super) async fn events_of(store: &dyn SessionStore, snapshot_id: &str) -> Vec<OutboxEvent> {
    outbox(store)
        .list_outbox(&OutboxQuery {
            snapshot_id: Some(snapshot_id.to_owned()),
            limit: Some(1000),
            ..Default::default()
        })
        .await
        .expect("list_outbox failed")
}

/// Claims every due row at `at` and keeps those of `snapshot_id`.
async fn claim_mine(
    store: &dyn SessionStore,
    snapshot_id: &str,
    at: chrono::DateTime<Utc>,
    lease: Duration,
) -> Vec<OutboxLease> {
    outbox(store)
        .claim_outbox(at, 100_000, lease)
        .await
        .expect("claim_outbox failed")
        .into_iter()
        .filter(|l| l.event.snapshot_id == snapshot_id)
        .collect()
}

/// A save that makes a snapshot wait writes one `hold.created` with it
/// (under a minted id, a fixed id, and an insert); a save that does not, or
/// that leaves a waiting row waiting, writes none; a failed update writes
/// none; a resume claim writes `hold.decided` per decision and an in-doubt
/// timer at its lease's end.
pub async fn outbox_events_are_written_with_the_hold(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let minted = put(&*store, None, held(&session, json!({"approvers": ["finance"]}))).await;
    let events = events_of(&*store, &minted.snapshot_id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let created = &events[0];
    assert_eq!(created.kind, HOLD_CREATED);
    assert_eq!(created.state, OutboxState::Pending);
    assert_eq!(created.session_id, session);
    assert_eq!(created.data["tool"], "transferMoney");
    assert_eq!(created.data["ref"], "r1");
    assert_eq!(created.data["input"]["amount"], 50000);
    assert_eq!(created.data["approvers"], json!(["finance"]));
    assert_eq!(created.data["snapshotId"], Value::String(minted.snapshot_id.clone()));

    // Saved again, still waiting: nothing new.
    let again = minted.clone();
    put(&*store, Some(&minted.snapshot_id), again).await;
    assert_eq!(events_of(&*store, &minted.snapshot_id).await.len(), 1);

    // Under a fixed id, and inserted.
    let fixed = fresh_id("held");
    put(&*store, Some(&fixed), held(&session, json!(true))).await;
    assert_eq!(events_of(&*store, &fixed).await.len(), 1);
    let inserted = fresh_id("inserted");
    store
        .insert_snapshot(&inserted, held(&session, json!(true)))
        .await
        .expect("insert_snapshot failed");
    assert_eq!(events_of(&*store, &inserted).await.len(), 1);

    // Not waiting, or not written: nothing.
    let plain = put(&*store, None, Snapshot::new(SessionState::new(&session))).await;
    assert!(events_of(&*store, &plain.snapshot_id).await.is_empty());
    let refused = fresh_id("refused");
    let failed = store
        .save_snapshot(
            Some(&refused),
            Box::new(|_| Err(holdpoint::Error::InvalidArgument("no".into()))),
        )
        .await;
    assert!(failed.is_err());
    assert!(events_of(&*store, &refused).await.is_empty());

    // The claim of a resume: one decided event per decision, and the
    // in-doubt timer at the lease's end.
    let lease_until = Utc::now() + chrono::Duration::seconds(60);
    let claim = ResumeClaim {
        snapshot_id: minted.snapshot_id.clone(),
        lease_until,
        takeover: false,
    };
    store
        .claim_resume(claim, vec![approve_record(&session, &minted.snapshot_id)])
        .await
        .expect("claim_resume failed");
    let events = events_of(&*store, &minted.snapshot_id).await;
    let kinds: Vec<(&str, bool)> = events.iter().map(|e| (e.kind.as_str(), e.timer)).collect();
    assert_eq!(
        kinds,
        [(HOLD_CREATED, false), (HOLD_DECIDED, false), (HOLD_IN_DOUBT, true)],
        "{events:?}"
    );
    assert_eq!(events[1].data["decisions"][0]["decision"], "approve");
    let drift = (events[2].due_at - lease_until).num_milliseconds().abs();
    assert!(
        drift <= 1,
        "in-doubt timer due {} for a lease until {lease_until}",
        events[2].due_at
    );

    // A claim that is refused writes nothing.
    let refused = store
        .claim_resume(
            ResumeClaim::new(minted.snapshot_id.clone()),
            vec![approve_record(&session, &minted.snapshot_id)],
        )
        .await;
    assert!(refused.is_err());
    assert_eq!(events_of(&*store, &minted.snapshot_id).await.len(), 3);
}

/// A claimed row is settled only with its claim's token; a retry is due
/// later and not claimable before; a dead row is not claimed; an
/// operator's retry makes it pending again with its attempts reset.
pub async fn outbox_settles_need_the_claim(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let row = put(&*store, None, held(&session, json!(true))).await;
    let id = row.snapshot_id;
    let now = Utc::now() + chrono::Duration::seconds(1);
    let lease = Duration::from_secs(30);
    let claimed = claim_mine(&*store, &id, now, lease).await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let first = &claimed[0];
    assert_eq!(first.event.attempts, 1);
    assert!(first.event.lease_until.is_some());
    // Leased: not claimed again meanwhile.
    assert!(claim_mine(&*store, &id, now, lease).await.is_empty());

    let wrong = outbox(&*store)
        .settle_outbox(
            &first.event.id,
            "not-the-token",
            OutboxOutcome::Delivered { done: vec![] },
        )
        .await
        .expect_err("a settle with another token must be refused");
    assert_eq!(wrong.status(), Status::FailedPrecondition, "{wrong}");
    let missing = outbox(&*store)
        .settle_outbox("no-such-event", &first.token, OutboxOutcome::Delivered { done: vec![] })
        .await
        .expect_err("a settle of a missing row must fail");
    assert_eq!(missing.status(), Status::NotFound, "{missing}");

    let later = now + chrono::Duration::seconds(10);
    outbox(&*store)
        .settle_outbox(
            &first.event.id,
            &first.token,
            OutboxOutcome::Retry {
                due_at: later,
                error: Some("HTTP 500".into()),
                done: vec!["webhook:0".into()],
                counted: true,
            },
        )
        .await
        .expect("settle failed");
    // The token is spent.
    assert!(
        outbox(&*store)
            .settle_outbox(&first.event.id, &first.token, OutboxOutcome::Delivered { done: vec![] })
            .await
            .is_err()
    );
    assert!(claim_mine(&*store, &id, now, lease).await.is_empty());
    let second = claim_mine(&*store, &id, later, lease).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].event.attempts, 2);
    assert_eq!(second[0].event.last_error.as_deref(), Some("HTTP 500"));
    assert_eq!(second[0].event.done, ["webhook:0"]);
    outbox(&*store)
        .settle_outbox(
            &second[0].event.id,
            &second[0].token,
            OutboxOutcome::Dead {
                error: "gave up".into(),
                done: vec!["webhook:0".into()],
            },
        )
        .await
        .expect("settle failed");
    let far = later + chrono::Duration::days(1);
    assert!(claim_mine(&*store, &id, far, lease).await.is_empty());
    let listed = events_of(&*store, &id).await;
    assert_eq!(listed[0].state, OutboxState::Dead);
    let dead_only = outbox(&*store)
        .list_outbox(&OutboxQuery {
            state: Some(OutboxState::Dead),
            limit: Some(100_000),
            ..Default::default()
        })
        .await
        .expect("list_outbox failed");
    assert!(dead_only.iter().any(|e| e.id == listed[0].id));
    assert!(dead_only.iter().all(|e| e.state == OutboxState::Dead));

    let retried = outbox(&*store)
        .retry_outbox(&listed[0].id)
        .await
        .expect("retry_outbox failed")
        .expect("the row exists");
    assert_eq!((retried.state, retried.attempts), (OutboxState::Pending, 0));
    assert!(
        outbox(&*store)
            .retry_outbox("no-such-event")
            .await
            .expect("retry_outbox failed")
            .is_none()
    );
    let third = claim_mine(&*store, &id, Utc::now() + chrono::Duration::seconds(1), lease).await;
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].event.done, ["webhook:0"]);
}

/// A timer row is not due before its deadline, is claimed once when it is,
/// and once delivered is never claimed again.
pub async fn outbox_timers_fire_once(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let remind_at = Utc::now() + chrono::Duration::minutes(10);
    let interrupt = json!({
        REMIND_AT: remind_at.to_rfc3339(),
        metadata::EXPIRES_AT: (remind_at + chrono::Duration::minutes(10)).to_rfc3339(),
    });
    let row = put(&*store, None, held(&session, interrupt)).await;
    let id = row.snapshot_id;
    let lease = Duration::from_secs(30);
    let events = events_of(&*store, &id).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, [HOLD_CREATED, HOLD_REMINDED, HOLD_EXPIRED], "{events:?}");

    // Before the deadline only the created event is due.
    let now = claim_mine(&*store, &id, Utc::now() + chrono::Duration::seconds(1), lease).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].event.kind, HOLD_CREATED);
    outbox(&*store)
        .settle_outbox(
            &now[0].event.id,
            &now[0].token,
            OutboxOutcome::Delivered { done: vec![] },
        )
        .await
        .expect("settle failed");

    // Past the reminder's deadline (as after a restart that spanned it):
    // the reminder, once.
    let past = remind_at + chrono::Duration::seconds(1);
    let due = claim_mine(&*store, &id, past, lease).await;
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].event.kind, HOLD_REMINDED);
    assert!(due[0].event.timer);
    assert!(claim_mine(&*store, &id, past, lease).await.is_empty());
    outbox(&*store)
        .settle_outbox(
            &due[0].event.id,
            &due[0].token,
            OutboxOutcome::Delivered { done: vec![] },
        )
        .await
        .expect("settle failed");
    let much_later = remind_at + chrono::Duration::minutes(5);
    assert!(claim_mine(&*store, &id, much_later, lease).await.is_empty());
    let expiry = remind_at + chrono::Duration::minutes(11);
    let expired = claim_mine(&*store, &id, expiry, lease).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].event.kind, HOLD_EXPIRED);
    assert_eq!(expired[0].event.data["onExpire"], "expire");
}

/// Two handles (two processes) claiming at the same moment: each row goes
/// to one of them. A claim whose worker died (its lease lapsed) is claimed
/// again by the other handle, as after a restart, and the dead worker's
/// token no longer settles it.
pub async fn two_handles_claim_outbox_once(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(put(&*a, None, held(&session, json!(true))).await.snapshot_id);
    }
    let now = Utc::now() + chrono::Duration::seconds(1);
    let lease = Duration::from_secs(30);
    let claim = |store: Arc<dyn SessionStore>| async move {
        outbox(&*store)
            .claim_outbox(now, 100_000, lease)
            .await
            .expect("claim_outbox failed")
    };
    let (x, y) = tokio::join!(claim(a.clone()), claim(b.clone()));
    let mine = |l: &&OutboxLease| ids.contains(&l.event.snapshot_id);
    let from_a: Vec<&OutboxLease> = x.iter().filter(mine).collect();
    let from_b: Vec<&OutboxLease> = y.iter().filter(mine).collect();
    assert_eq!(from_a.len() + from_b.len(), ids.len(), "a: {from_a:?}\nb: {from_b:?}");
    for l in &from_a {
        assert!(
            !from_b.iter().any(|m| m.event.id == l.event.id),
            "{} claimed twice",
            l.event.id
        );
    }

    // The worker that held one of them died: past its lease, the other
    // handle takes it over.
    let (dead, survivor) = match from_a.first() {
        Some(l) => ((*l).clone(), b.clone()),
        None => ((*from_b[0]).clone(), a.clone()),
    };
    let after = now + chrono::Duration::seconds(31);
    let taken: Vec<OutboxLease> = claim(survivor.clone())
        .await
        .into_iter()
        .filter(|l| l.event.id == dead.event.id)
        .collect();
    assert!(taken.is_empty(), "a live lease must hold: {taken:?}");
    let taken: Vec<OutboxLease> = outbox(&*survivor)
        .claim_outbox(after, 100_000, lease)
        .await
        .expect("claim_outbox failed")
        .into_iter()
        .filter(|l| l.event.id == dead.event.id)
        .collect();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].event.attempts, 2);
    let stale = outbox(&*survivor)
        .settle_outbox(&dead.event.id, &dead.token, OutboxOutcome::Delivered { done: vec![] })
        .await
        .expect_err("the dead worker's token must no longer settle");
    assert_eq!(stale.status(), Status::FailedPrecondition);
    outbox(&*survivor)
        .settle_outbox(
            &taken[0].event.id,
            &taken[0].token,
            OutboxOutcome::Delivered { done: vec![] },
        )
        .await
        .expect("settle failed");
    let listed = events_of(&*a, &dead.event.snapshot_id).await;
    assert_eq!(listed[0].state, OutboxState::Delivered);
}
