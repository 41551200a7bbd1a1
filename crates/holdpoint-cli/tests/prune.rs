//! `holdpoint prune` against a SQLite file: the built binary deletes the
//! old sessions that are over and keeps the others.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use chrono::{Duration, Utc};
use holdpoint::FinishReason;
use holdpoint::session::{
    AuditDecision, AuditQuery, AuditRecord, SessionState, SessionStore, Snapshot, SnapshotStatus,
};
use serde_json::Value;

fn holdpoint(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_API_KEY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn aged(session: &str, days: i64, status: SnapshotStatus, finish: FinishReason) -> Snapshot {
    let mut row = Snapshot::new(SessionState::new(session));
    row.created_at = Utc::now() - Duration::days(days);
    row.updated_at = row.created_at;
    row.status = status;
    row.finish_reason = Some(finish);
    row
}

async fn put(store: &dyn SessionStore, row: Snapshot) -> Snapshot {
    store
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap()
        .unwrap()
}

fn record(session: &str, snapshot: &str) -> AuditRecord {
    AuditRecord {
        id: holdpoint::session::mint_id(),
        at: Utc::now(),
        principal: None,
        actor: None,
        agent: None,
        session_id: session.to_owned(),
        snapshot_id: snapshot.to_owned(),
        tool: "transferMoney".into(),
        reference: None,
        input_hash: "0".repeat(64),
        input: None,
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

#[tokio::test]
async fn prune_deletes_old_finished_sessions_in_steps_and_keeps_waiting_ones() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let store = holdpoint_stores::open_store(&url).await.unwrap();
    // Five old finished sessions (walked in steps of two), one old waiting
    // session, one finished yesterday.
    let mut old = Vec::new();
    for i in 0..5 {
        let row = put(
            &*store,
            aged(&format!("done-{i}"), 40, SnapshotStatus::Completed, FinishReason::Stop),
        )
        .await;
        store
            .capabilities()
            .audit()
            .unwrap()
            .append_audit(vec![record(&row.session_id, &row.snapshot_id)])
            .await
            .unwrap();
        old.push(row);
    }
    let waiting = put(
        &*store,
        aged("held", 40, SnapshotStatus::Completed, FinishReason::Interrupted),
    )
    .await;
    let recent = put(&*store, aged("recent", 1, SnapshotStatus::Failed, FinishReason::Stop)).await;

    let (code, out, err) = holdpoint(&["--store", &url, "prune", "--older-than", "30d", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{err}");
    let counted: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(counted["sessions"], 5, "{counted}");
    assert_eq!(counted["dryRun"], true);
    assert!(
        store.get_snapshot(&old[0].snapshot_id).await.unwrap().is_some(),
        "a dry run deleted"
    );

    let (code, out, err) = holdpoint(&[
        "--store",
        &url,
        "prune",
        "--older-than",
        "30d",
        "--audit",
        "--batch",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let pruned: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            &pruned["sessions"],
            &pruned["snapshots"],
            &pruned["auditRecords"],
            &pruned["examined"]
        ),
        (&Value::from(5), &Value::from(5), &Value::from(5), &Value::from(7)),
        "{pruned}"
    );
    for row in &old {
        assert!(
            store.get_snapshot(&row.snapshot_id).await.unwrap().is_none(),
            "{} survived",
            row.session_id
        );
    }
    let audit = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&AuditQuery::default())
        .await
        .unwrap();
    assert!(audit.is_empty(), "{audit:?}");
    assert!(
        store.get_snapshot(&waiting.snapshot_id).await.unwrap().is_some(),
        "the waiting session went"
    );
    assert!(
        store.get_snapshot(&recent.snapshot_id).await.unwrap().is_some(),
        "a recent session went"
    );

    let (code, out, _) = holdpoint(&["--store", &url, "prune", "--older-than", "30d"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("deleted 0 sessions"), "{out}");
}

#[test]
fn prune_refuses_bad_ages_an_agent_filter_and_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    for age in ["30", "0d", "3y"] {
        let (code, _, err) = holdpoint(&["--store", &url, "prune", "--older-than", age]);
        assert_eq!(code, 2, "{age}: {err}");
        assert!(err.contains(age), "{err}");
    }
    let (code, _, err) = holdpoint(&["--store", &url, "--agent", "bank", "prune", "--older-than", "30d"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--agent"), "{err}");
    let (code, _, err) = holdpoint(&["--server", "http://127.0.0.1:9", "prune", "--older-than", "30d"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--store"), "{err}");
}
