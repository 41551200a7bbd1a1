//! `Snapshot`, as a store row or a `getSnapshot` answer: decoding never
//! panics and round trips; status reads, visibility, claims, aborts and
//! row preparation on a decoded row give typed answers.
#![no_main]

use holdpoint::session::{
    SessionStore, Snapshot, SnapshotQuery, SnapshotStatus, claim_update, filter_snapshots, prepare_row,
};
use holdpoint_fuzz::harness::runtime;
use holdpoint_fuzz::round_trip;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(snapshot) = round_trip::<Snapshot>(data) else {
        return;
    };
    let now = chrono::Utc::now();
    let status = snapshot.read_status(now);
    assert!(
        status == snapshot.status || (snapshot.status == SnapshotStatus::Pending && status == SnapshotStatus::Expired)
    );
    let _ = snapshot.visible_to(None);
    let _ = snapshot.visible_to(Some("alice"));
    let _ = snapshot.is_waiting();
    let _ = snapshot.clone().as_read();
    for query in [
        SnapshotQuery::default(),
        SnapshotQuery {
            waiting_only: true,
            ..Default::default()
        },
        SnapshotQuery {
            owner: snapshot.owner.clone(),
            session_id: Some(snapshot.session_id.clone()),
            ..Default::default()
        },
    ] {
        let listed = filter_snapshots([&snapshot], &query);
        assert!(listed.len() <= 1);
    }
    let _ = claim_update("id")(Some(&snapshot));
    if let Ok(row) = prepare_row("id", None, snapshot.clone()) {
        assert_eq!(row.snapshot_id, "id");
        assert_eq!(row.session_id, snapshot.session_id);
    }

    // The row in a store: claim once, abort, read back.
    if snapshot.session_id.is_empty() {
        return;
    }
    runtime().block_on(async {
        let store = holdpoint::session::InMemoryStore::new();
        let row = snapshot.clone();
        let saved = store
            .save_snapshot(Some("s"), Box::new(move |_| Ok(Some(row))))
            .await
            .expect("a row with a session id saves")
            .expect("written");
        assert_eq!(saved.session_id, snapshot.session_id);
        let first = store.claim_resume("s", Vec::new()).await;
        assert_eq!(first.is_ok(), snapshot.resumed_at.is_none());
        assert!(
            store.claim_resume("s", Vec::new()).await.is_err(),
            "a second claim succeeded"
        );
        let before = store.get_snapshot("s").await.expect("read").expect("present");
        let previous = store.abort("s").await.expect("abort").expect("present");
        assert_eq!(previous, before.status);
        let after = store.get_snapshot("s").await.expect("read").expect("present");
        if before.status.is_terminal() {
            assert_eq!(after.status, before.status, "abort changed a settled row");
        }
        assert_eq!(after.session_id, snapshot.session_id);
    });
});
