use super::rows::HOT_WAITING;
use super::*;
use crate::message::metadata;
use crate::message::{Message, Part, Role};
use crate::model::FinishReason;
use crate::session::SessionState;
use serde_json::json;

pub(super) fn waiting(interrupt: serde_json::Value) -> Snapshot {
    let mut paused = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 0.1 + 0.2})));
    paused.set_meta(metadata::INTERRUPT, interrupt);
    let mut state = SessionState::new("s1");
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![paused])];
    let mut row = Snapshot::new(state);
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

pub(super) async fn save(store: &InMemoryStore, row: Snapshot) -> Snapshot {
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
pub(super) async fn push_out_of_window(store: &InMemoryStore) {
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
async fn a_finished_row_is_packed_when_saved_and_reads_back_equal() {
    let store = InMemoryStore::new();
    let mut row = waiting(json!(true));
    row.finish_reason = Some(FinishReason::Stop);
    row.parent_id = Some("p1".into());
    row.owner = Some("olga".into());
    row.agent = Some("bank".into());
    row.heartbeat_at = Some(row.created_at);
    if let Some(state) = row.state.as_mut() {
        state.custom = json!({"step": 2});
        state.artifacts.push(crate::session::Artifact::text("plan", "pay"));
    }
    let saved = save(&store, row).await;
    assert!(is_packed(&store, &saved.snapshot_id));
    assert_eq!(
        store.get_snapshot(&saved.snapshot_id).await.unwrap(),
        Some(saved.clone())
    );
    assert_eq!(store.get_latest_snapshot("s1").await.unwrap(), Some(saved));
}

#[tokio::test]
async fn a_pending_row_stays_decoded() {
    let store = InMemoryStore::new();
    let mut row = waiting(json!(true));
    row.finish_reason = None;
    row.status = SnapshotStatus::Pending;
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
