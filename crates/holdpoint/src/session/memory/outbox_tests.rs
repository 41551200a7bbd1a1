//! The in-memory outbox: payloads built at delivery, and which rows a
//! store without a channel writes.

use std::time::Duration;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::tests::{push_out_of_window, save, waiting};
use super::*;
use crate::session::outbox::{
    HOLD_CREATED, HOLD_DECIDED, HOLD_EXPIRED, HOLD_IN_DOUBT, HoldTimers, OutboxState, hold_events,
};
use crate::session::{AuditDecision, OutboxStore};

fn record(row: &Snapshot) -> AuditRecord {
    AuditRecord {
        id: mint_id(),
        at: Utc::now(),
        principal: Some("bob".into()),
        actor: Some("bob".into()),
        agent: row.agent.clone(),
        session_id: row.session_id.clone(),
        snapshot_id: row.snapshot_id.clone(),
        tool: "transferMoney".into(),
        reference: Some("r1".into()),
        input_hash: String::new(),
        input: Some(json!({"amount": 1})),
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Approve,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    }
}

/// A waiting row whose rule asks for a reminder and an expiry.
fn timed() -> Snapshot {
    let mut data = Map::new();
    data.insert("approvers".into(), json!(["finance"]));
    let timers = HoldTimers {
        remind_after: Some(Duration::from_secs(60)),
        expire_after: Some(Duration::from_secs(600)),
        ..HoldTimers::default()
    };
    timers.stamp(&mut data, Utc::now());
    waiting(Value::Object(data))
}

async fn kinds(store: &InMemoryStore, snapshot_id: &str) -> Vec<String> {
    let query = OutboxQuery {
        snapshot_id: Some(snapshot_id.to_owned()),
        ..OutboxQuery::default()
    };
    let mut kinds: Vec<String> = store
        .list_outbox(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    kinds.sort();
    kinds
}

async fn claim(store: &InMemoryStore, row: &Snapshot) {
    let claim = ResumeClaim::new(row.snapshot_id.clone());
    store.claim_resume(claim, vec![record(row)]).await.unwrap();
}

/// Without a channel only the timers that act are written; once a
/// channel is configured (here: the store switched, as a restart would),
/// every change from then on is told — the decision of a hold created
/// before included — and nothing of the changes before.
#[tokio::test]
async fn a_channel_added_later_is_told_every_change_from_then_on() {
    let store = InMemoryStore::with_outbox_writes(OutboxWrites::Timers);
    let early = save(&store, timed()).await;
    assert_eq!(kinds(&store, &early.snapshot_id).await, [HOLD_EXPIRED]);
    let before = save(&store, timed()).await;
    claim(&store, &early).await;
    assert_eq!(kinds(&store, &early.snapshot_id).await, [HOLD_EXPIRED, HOLD_IN_DOUBT]);

    store.set_outbox_writes(OutboxWrites::All);
    // The hold created before the channel: its decision is told, with the
    // payload a store writing everything would have carried.
    claim(&store, &before).await;
    assert_eq!(
        kinds(&store, &before.snapshot_id).await,
        [HOLD_DECIDED, HOLD_EXPIRED, HOLD_IN_DOUBT]
    );
    let query = OutboxQuery {
        snapshot_id: Some(before.snapshot_id.clone()),
        ..OutboxQuery::default()
    };
    let listed = store.list_outbox(&query).await.unwrap();
    let decided = listed.iter().find(|e| e.kind == HOLD_DECIDED).unwrap();
    assert_eq!(decided.data["decisions"][0]["decision"], "approve");
    assert_eq!(decided.data["input"]["amount"], 1);
    // A hold created after: every row.
    let after = save(&store, timed()).await;
    assert_eq!(kinds(&store, &after.snapshot_id).await.len(), 3);
}

/// The rows keep ids and kind; what a listing or a claim shows is the
/// payload `hold_events` builds, from the row as saved (decoded or
/// packed). A row whose snapshot is gone by delivery is cancelled.
#[tokio::test]
async fn a_payload_is_built_at_delivery_from_the_saved_row() {
    let store = InMemoryStore::new();
    let held = save(&store, timed()).await;
    let written = hold_events(false, &held);
    let query = OutboxQuery {
        snapshot_id: Some(held.snapshot_id.clone()),
        ..OutboxQuery::default()
    };
    let datas = |events: Vec<OutboxEvent>| {
        let mut d: Vec<(String, Value)> = events.into_iter().map(|e| (e.kind, e.data)).collect();
        d.sort_by(|a, b| a.0.cmp(&b.0));
        d
    };
    let expected = datas(written);
    assert_eq!(datas(store.list_outbox(&query).await.unwrap()), expected);
    assert!(
        store.lock().outbox.iter().all(|q| q.event.data.is_null()),
        "rows keep no payload"
    );
    push_out_of_window(&store).await;
    assert_eq!(
        datas(store.list_outbox(&query).await.unwrap()),
        expected,
        "from the packed row"
    );

    let claimed = store
        .claim_outbox(Utc::now(), 1000, Duration::from_secs(30))
        .await
        .unwrap();
    let created = claimed
        .iter()
        .find(|l| l.event.snapshot_id == held.snapshot_id && l.event.kind == HOLD_CREATED)
        .unwrap();
    assert_eq!(
        Some(&created.event.data),
        expected.iter().find(|d| d.0 == HOLD_CREATED).map(|d| &d.1)
    );

    // Deleted before delivery (as a prune does): its due timers are
    // cancelled when claimed, saying why, and listed without a payload.
    let other = save(&store, timed()).await;
    store.lock().rows.remove(other.snapshot_id.as_str());
    let later = Utc::now() + chrono::Duration::hours(1);
    let claimed = store.claim_outbox(later, 1000, Duration::from_secs(30)).await.unwrap();
    assert!(claimed.iter().all(|l| l.event.snapshot_id != other.snapshot_id));
    let gone = OutboxQuery {
        snapshot_id: Some(other.snapshot_id.clone()),
        ..OutboxQuery::default()
    };
    let rows = store.list_outbox(&gone).await.unwrap();
    assert_eq!(rows.len(), 3);
    assert!(
        rows.iter()
            .all(|e| e.state == OutboxState::Cancelled && e.data.is_null())
    );
    assert!(rows[0].last_error.as_deref().unwrap_or_default().contains("pruned"));
}

/// An escalation rewrites the held row in place (the roles it adds become
/// approvers): the rows written before keep the payload of the row they
/// reported — the reminder still names the first approvers.
#[tokio::test]
async fn a_rewrite_in_place_keeps_the_payloads_written_before() {
    let store = InMemoryStore::new();
    let held = save(&store, timed()).await;
    let written = hold_events(false, &held);
    let roles = vec!["cfo".to_owned()];
    let escalate = Box::new(move |existing: Option<&Snapshot>| {
        Ok(existing.and_then(|row| crate::session::outbox::escalated_hold(row, Some("r1"), "transferMoney", &roles)))
    });
    store
        .save_snapshot(Some(&held.snapshot_id), escalate)
        .await
        .unwrap()
        .expect("escalated");
    let query = OutboxQuery {
        snapshot_id: Some(held.snapshot_id.clone()),
        ..OutboxQuery::default()
    };
    let listed = store.list_outbox(&query).await.unwrap();
    assert_eq!(listed.len(), written.len(), "a rewrite writes no new hold rows");
    for event in &written {
        let now = listed.iter().find(|e| e.kind == event.kind).unwrap();
        assert_eq!(now.data, event.data, "{}", event.kind);
    }
    assert_eq!(
        listed.iter().find(|e| e.kind == HOLD_CREATED).unwrap().data["approvers"],
        json!(["finance"])
    );
}
