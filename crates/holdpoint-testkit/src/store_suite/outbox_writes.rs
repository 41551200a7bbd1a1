//! Which outbox rows a store writes (`OutboxWrites`, docs/reference.md
//! §11.3): a handle opened with no channel configured writes only the
//! timers that act; a handle opened later with a channel (a restart) is
//! told every change from then on, the decision of a hold created before
//! included.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use holdpoint::session::outbox::{HOLD_CREATED, HOLD_DECIDED, HOLD_EXPIRED, HOLD_IN_DOUBT, HOLD_REMINDED, HoldTimers};
use holdpoint::session::{ResumeClaim, SessionStore, Snapshot};
use serde_json::{Map, Value, json};

use super::outbox::{events_of, held};
use super::{approve_record, fresh_session, put};

/// A held call whose rule asks for a reminder and an expiry.
fn timed(session: &str) -> Snapshot {
    let mut data = Map::new();
    data.insert("approvers".into(), json!(["finance"]));
    let timers = HoldTimers {
        remind_after: Some(Duration::from_secs(60)),
        expire_after: Some(Duration::from_secs(600)),
        ..HoldTimers::default()
    };
    timers.stamp(&mut data, Utc::now());
    held(session, Value::Object(data))
}

async fn kinds(store: &dyn SessionStore, snapshot_id: &str) -> Vec<String> {
    let mut kinds: Vec<String> = events_of(store, snapshot_id)
        .await
        .into_iter()
        .map(|e| e.kind)
        .collect();
    kinds.sort();
    kinds
}

async fn claim(store: &dyn SessionStore, session: &str, row: &Snapshot) {
    store
        .claim_resume(
            ResumeClaim::new(row.snapshot_id.clone()),
            vec![approve_record(session, &row.snapshot_id)],
        )
        .await
        .expect("claim_resume failed");
}

/// `timers` writes only `OutboxWrites::Timers`, `all` every row; both
/// reach one database (`all` stands for the server restarted with a
/// channel). Holds and claims through `timers` write only the expiry and
/// in-doubt timers; through `all`, a hold created before is told its
/// decision, and a new hold every row.
pub async fn a_store_without_a_channel_writes_only_the_timers_that_act(
    timers: Arc<dyn SessionStore>,
    all: Arc<dyn SessionStore>,
) {
    let session = fresh_session();
    let early = put(&*timers, None, timed(&session)).await;
    assert_eq!(kinds(&*timers, &early.snapshot_id).await, [HOLD_EXPIRED]);
    let before = put(&*timers, None, timed(&session)).await;
    claim(&*timers, &session, &early).await;
    assert_eq!(
        kinds(&*timers, &early.snapshot_id).await,
        [HOLD_EXPIRED, HOLD_IN_DOUBT],
        "no decision is told without a channel"
    );

    claim(&*all, &session, &before).await;
    assert_eq!(
        kinds(&*all, &before.snapshot_id).await,
        [HOLD_DECIDED, HOLD_EXPIRED, HOLD_IN_DOUBT],
        "a channel added later is told the decision of a hold created before"
    );
    let decided = events_of(&*all, &before.snapshot_id)
        .await
        .into_iter()
        .find(|e| e.kind == HOLD_DECIDED)
        .expect("a decided row");
    assert_eq!(decided.data["decisions"][0]["decision"], "approve");

    let after = put(&*all, None, timed(&session)).await;
    assert_eq!(
        kinds(&*all, &after.snapshot_id).await,
        [HOLD_CREATED, HOLD_EXPIRED, HOLD_REMINDED]
    );
}
