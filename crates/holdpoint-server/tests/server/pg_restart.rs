//! PostgreSQL restarted (fast stop: connections cut, then started) under load: turns in
//! flight fail with `UNAVAILABLE`, nothing half-written, everything
//! acknowledged is there, and the next requests succeed.
//!
//! Turns are in flight inside PostgreSQL at the stop by construction: just
//! before it, a trigger makes every insert sleep, and the stop comes while
//! a save sleeps in it. (Relying on the load alone left it to chance: when
//! the stop fell between two statements, only idle connections were cut,
//! the pool reconnected once the server was back, and no turn failed; even
//! a save waiting for a lock could get it from the dying holder and commit
//! before its own backend was stopped.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use holdpoint::FinishReason;
use holdpoint::session::SnapshotStatus;
use holdpoint_server::Server;
use holdpoint_testkit::TempPostgres;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::support::*;

/// A statement-level trigger that makes every insert into the snapshots
/// table sleep for a second.
const SLOW_INSERTS: &str = "
    CREATE FUNCTION holdpoint_test_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_sleep(1);
        RETURN NULL;
    END $$;
    CREATE TRIGGER holdpoint_test_slow_inserts BEFORE INSERT ON holdpoint_snapshots
        FOR EACH STATEMENT EXECUTE FUNCTION holdpoint_test_sleep();";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load() {
    let Some(pg) = TempPostgres::start_private_or_skip("postgres_restarted_under_load") else {
        return;
    };
    let store = crate::replicas::open_store(pg.url()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let s = Arc::new(TestServer::start(Server::builder().agent(ops(store.clone(), runs)).build().unwrap()).await);
    let path = "/agents/opsAgent";
    let mut paused = Vec::new();
    for i in 0..3 {
        let (code, body) = s.post(path, json!({"data": user(&format!("close p-{i}"))}), None).await;
        assert_eq!(code, 200, "{body:#}");
        paused.push(body["result"].clone());
    }

    // Load: 16 clients starting turns until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..16 {
        let (s, stop) = (s.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut outcomes: Vec<(u16, Value)> = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let r = s
                    .client
                    .post(s.url("/agents/opsAgent"))
                    .json(&json!({"data": user(&format!("close c{c}-{i}"))}))
                    .timeout(Duration::from_secs(20))
                    .send()
                    .await
                    .unwrap();
                let (code, body) = read(r).await;
                outcomes.push((code.as_u16(), body));
                i += 1;
            }
            outcomes
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Every insert now sleeps in a trigger: stop while a save sleeps there,
    // so a turn is certainly in flight inside PostgreSQL.
    let mut admin = sqlx::PgConnection::connect(pg.url()).await.unwrap();
    sqlx::raw_sql(SLOW_INSERTS).execute(&mut admin).await.unwrap();
    let waiting_since = Instant::now();
    loop {
        let sleeping: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
            .fetch_one(&mut admin)
            .await
            .unwrap();
        if sleeping > 0 {
            break;
        }
        assert!(
            waiting_since.elapsed() < Duration::from_secs(20),
            "no save ever reached the slow trigger"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pg.stop().unwrap();
    drop(admin);
    tokio::time::sleep(Duration::from_millis(500)).await;
    pg.start_again().unwrap();
    let mut admin = sqlx::PgConnection::connect(pg.url()).await.unwrap();
    sqlx::raw_sql("DROP TRIGGER holdpoint_test_slow_inserts ON holdpoint_snapshots")
        .execute(&mut admin)
        .await
        .unwrap();
    // Wait until turns go through again.
    let back = Instant::now();
    loop {
        let (code, body) = s.post(path, json!({"data": user("close probe")}), None).await;
        if code == 200 && body["result"]["finishReason"] == "interrupted" {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(20),
            "never recovered: {code} {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);

    let mut acknowledged = Vec::new();
    let mut failed = 0;
    let mut other = Vec::new();
    for client in clients {
        for (code, body) in client.await.unwrap() {
            if code == 200 && body["result"]["finishReason"] == "interrupted" {
                acknowledged.push(body["result"]["snapshotId"].as_str().unwrap().to_owned());
                continue;
            }
            failed += 1;
            let error = if code == 200 {
                &body["result"]["error"]
            } else {
                &body["error"]
            };
            if error["status"] != "UNAVAILABLE" {
                other.push(format!("{code} {error}"));
            }
        }
    }
    println!(
        "postgres restart: {} turns acknowledged, {failed} failed ({} not UNAVAILABLE)",
        acknowledged.len(),
        other.len()
    );
    assert!(failed > 0, "the restart was felt");
    assert!(
        other.is_empty(),
        "in-flight turns fail with UNAVAILABLE: {:?}",
        &other[..other.len().min(5)]
    );

    // Nothing half-written: every row reads whole; everything acknowledged is there.
    let (rows, _) = dump(store.as_ref()).await;
    for row in &rows {
        assert_eq!(row.status, SnapshotStatus::Completed, "{row:#?}");
        assert_eq!(row.finish_reason, Some(FinishReason::Interrupted), "{row:#?}");
        assert!(row.state.as_ref().is_some_and(|s| !s.messages.is_empty()), "{row:#?}");
    }
    let before: Vec<String> = paused
        .iter()
        .map(|p| p["snapshotId"].as_str().unwrap().to_owned())
        .collect();
    for id in acknowledged.iter().chain(&before) {
        assert!(rows.iter().any(|r| &r.snapshot_id == id), "acknowledged {id} lost");
    }
    // The next requests succeed: approvals made before the restart go
    // through.
    let approve = json!({"data": {"resume": {"restart": [restart(&paused_part(&paused[0]), json!({"toolApproved": true}))]}},
                         "init": {"snapshotId": paused[0]["snapshotId"]}});
    let (code, body) = s.post(path, approve, None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    let approve = json!({"data": {"resume": {"restart": [restart(&paused_part(&paused[2]), json!({"toolApproved": true}))]}},
                         "init": {"snapshotId": paused[2]["snapshotId"]}});
    let (code, body) = s.post(path, approve, None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
}
