//! Updates write only the columns that changed, and the schema migrates:
//! the lookups by indexed columns still find exactly the rows they should.

use chrono::{Duration, Utc};
use holdpoint::FinishReason;
use holdpoint::session::SnapshotListing;
use holdpoint::session::{SessionState, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus};
use holdpoint_store_sqlite::SqliteStore;

fn waiting(session: &str, agent: &str, owner: &str) -> Snapshot {
    let mut row = Snapshot::new(SessionState::new(session));
    row.status = SnapshotStatus::Completed;
    row.finish_reason = Some(FinishReason::Interrupted);
    row.agent = Some(agent.into());
    row.owner = Some(owner.into());
    row
}

async fn ids(store: &SqliteStore, query: SnapshotQuery) -> Vec<String> {
    let rows = store.list_snapshots(&query).await.unwrap();
    rows.into_iter().map(|r| r.snapshot_id).collect()
}

#[tokio::test]
async fn an_update_moves_the_row_in_every_index_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("columns.db")).await.unwrap();
    let first = waiting("s1", "teller", "alice");
    store
        .save_snapshot(Some("a"), Box::new(move |_| Ok(Some(first))))
        .await
        .unwrap();
    // A second session's row, newer, stays as it is throughout.
    let other = waiting("s2", "teller", "bob");
    store
        .save_snapshot(Some("b"), Box::new(move |_| Ok(Some(other))))
        .await
        .unwrap();
    let by_agent = |agent: &str| SnapshotQuery {
        agent: Some(agent.into()),
        ..Default::default()
    };
    let by_owner = |owner: &str| SnapshotQuery {
        owner: Some(owner.into()),
        ..Default::default()
    };
    let waiting_now = SnapshotQuery {
        waiting_only: true,
        ..Default::default()
    };
    assert_eq!(ids(&store, waiting_now.clone()).await, ["b", "a"]);

    // Change every column the indexes hold: agent, owner, creation time,
    // status and finish reason, and the parent.
    store
        .save_snapshot(
            Some("a"),
            Box::new(|old| {
                let mut row = old.cloned().expect("row a exists");
                row.agent = Some("auditor".into());
                row.owner = Some("carol".into());
                row.created_at = Utc::now() + Duration::hours(1);
                row.finish_reason = Some(FinishReason::Stop);
                row.parent_id = Some("b".into());
                Ok(Some(row))
            }),
        )
        .await
        .unwrap();
    assert_eq!(ids(&store, by_agent("auditor")).await, ["a"]);
    assert_eq!(ids(&store, by_agent("teller")).await, ["b"]);
    assert_eq!(ids(&store, by_owner("carol")).await, ["a"]);
    assert!(ids(&store, by_owner("alice")).await.is_empty());
    assert_eq!(ids(&store, waiting_now.clone()).await, ["b"]);
    // Newest first: row a's creation time moved past row b's.
    assert_eq!(ids(&store, SnapshotQuery::default()).await, ["a", "b"]);
    let read = store.get_snapshot("a").await.unwrap().unwrap();
    assert_eq!(read.parent_id.as_deref(), Some("b"));
    assert_eq!(read.finish_reason, Some(FinishReason::Stop));

    // An update that changes no indexed column keeps the row where it is.
    store
        .save_snapshot(
            Some("b"),
            Box::new(|old| {
                let mut row = old.cloned().expect("row b exists");
                if let Some(state) = row.state.as_mut() {
                    state.custom = serde_json::json!({"note": "only the data changed"});
                }
                Ok(Some(row))
            }),
        )
        .await
        .unwrap();
    assert_eq!(ids(&store, waiting_now).await, ["b"]);
    assert_eq!(ids(&store, by_owner("bob")).await, ["b"]);
    let read = store.get_snapshot("b").await.unwrap().unwrap();
    assert_eq!(read.state.unwrap().custom["note"], "only the data changed");
}

#[tokio::test]
async fn a_file_at_schema_1_is_migrated_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // The file as the first release left it: schema 1 and one waiting row.
    let row = {
        let mut row = waiting("s-old", "teller", "alice");
        row.snapshot_id = "old-1".into();
        row
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../migrations/0001_init.sql")).unwrap();
        conn.execute_batch(
            "CREATE TABLE holdpoint_schema_migrations (version INTEGER NOT NULL PRIMARY KEY, \
             name TEXT NOT NULL, applied_at TEXT NOT NULL); \
             INSERT INTO holdpoint_schema_migrations VALUES (1, 'init', '2026-11-01T00:00:00Z');",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO holdpoint_snapshots (snapshot_id, session_id, created_at_ns, updated_at_ns, \
             status, finish_reason, agent, owner, data) \
             VALUES ('old-1', 's-old', 1, 1, 'completed', 'interrupted', 'teller', 'alice', ?1)",
            [serde_json::to_string(&row).unwrap()],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let read = store.get_snapshot("old-1").await.unwrap().unwrap();
    assert_eq!(read.session_id, "s-old");
    let waiting_now = SnapshotQuery {
        waiting_only: true,
        ..Default::default()
    };
    assert_eq!(ids(&store, waiting_now).await, ["old-1"]);
    store.close().await;

    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM holdpoint_schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions[..2], [1, 2], "{versions:?}");
    assert!(versions.contains(&4), "the outbox migration ran: {versions:?}");
    let indexes: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'holdpoint_snapshots_%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        indexes.contains(&"holdpoint_snapshots_running".to_owned()),
        "{indexes:?}"
    );
    assert!(
        !indexes.contains(&"holdpoint_snapshots_status".to_owned()),
        "{indexes:?}"
    );
}

/// A first claim appends `resumedAt` and the lease to the stored document
/// (no decode and re-encode of the row, which would place them among the
/// other fields) and sets `resumed_at_ns`; a row whose document already
/// names the lease is claimed whole instead, and still reads as claimed.
#[tokio::test]
async fn a_first_claim_is_appended_to_the_stored_document() {
    use holdpoint::session::ResumeClaim;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claim.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let paused = waiting("s1", "teller", "alice");
    store
        .save_snapshot(Some("p"), Box::new(move |_| Ok(Some(paused))))
        .await
        .unwrap();
    let mut leased = waiting("s2", "teller", "alice");
    leased.resume_lease_until = Some(Utc::now() - Duration::seconds(5));
    store
        .save_snapshot(Some("q"), Box::new(move |_| Ok(Some(leased))))
        .await
        .unwrap();
    for id in ["p", "q"] {
        store.claim_resume(ResumeClaim::new(id), Vec::new()).await.unwrap();
    }

    let raw = rusqlite::Connection::open(&path).unwrap();
    let stored = |id: &str| -> (String, Option<i64>) {
        raw.query_row(
            "SELECT data, resumed_at_ns FROM holdpoint_snapshots WHERE snapshot_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let (data, resumed_at_ns) = stored("p");
    let row = store.get_snapshot("p").await.unwrap().unwrap();
    let at = row.resumed_at.expect("claimed");
    assert_eq!(resumed_at_ns, at.timestamp_nanos_opt());
    let lease = serde_json::to_string(&row.resume_lease_until.unwrap()).unwrap();
    assert!(
        data.ends_with(&format!("\"resumeLeaseUntil\":{lease}}}")),
        "appended in place: {data}"
    );
    let (data, resumed_at_ns) = stored("q");
    assert!(resumed_at_ns.is_some());
    assert_eq!(data.matches("\"resumeLeaseUntil\"").count(), 1, "{data}");
    assert!(store.get_snapshot("q").await.unwrap().unwrap().resumed_at.is_some());
    // Claimed once: a second claim is refused on both paths.
    for id in ["p", "q"] {
        let again = store.claim_resume(ResumeClaim::new(id), Vec::new()).await;
        assert!(matches!(again, Err(holdpoint::Error::AlreadyResumed(_))), "{again:?}");
    }
}
