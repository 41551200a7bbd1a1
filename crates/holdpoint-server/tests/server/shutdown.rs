//! Graceful shutdown: stop accepting, let running turns finish (bounded),
//! lose nothing — in process and with SIGTERM to a server process.

use std::time::{Duration, Instant};

use holdpoint::session::{SessionStore, SnapshotStatus};
use holdpoint_server::Server;
use serde_json::json;

use crate::child::ChildServer;
use crate::support::*;

#[tokio::test]
async fn running_turns_finish_before_serve_returns() {
    let store = memory();
    let mut server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(600)))
            .build()
            .unwrap(),
    )
    .await;
    let client = server.client.clone();
    let url = server.url("/agents/slowAgent");
    let request = tokio::spawn(async move {
        let r = client
            .post(url)
            .json(&json!({"data": user("hi"), "init": {"sessionId": "in-flight"}}))
            .send()
            .await
            .unwrap();
        read(r).await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    let _ = server.stop_signal().send(());
    server.take_task().await.unwrap().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "serve waited for the turn"
    );
    let (code, body) = request.await.unwrap();
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["message"]["content"][0]["text"], "finally");
    let latest = store.get_latest_snapshot("in-flight").await.unwrap().unwrap();
    assert_eq!(latest.status, SnapshotStatus::Completed);
    // No longer accepting.
    assert!(server.client.get(server.url("/healthz")).send().await.is_err());
}

#[tokio::test]
async fn turns_whose_caller_left_and_detached_runs_are_waited_for() {
    let store = memory();
    let mut server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(500)))
            .build()
            .unwrap(),
    )
    .await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let r = impatient
        .post(server.url("/agents/slowAgent"))
        .json(&json!({"data": user("hi"), "init": {"sessionId": "left"}}))
        .send()
        .await;
    assert!(r.is_err());
    let mut detach = user("bg");
    detach["detach"] = json!(true);
    let (code, body) = server
        .post(
            "/agents/slowAgent",
            json!({"data": detach, "init": {"sessionId": "detached"}}),
            None,
        )
        .await;
    assert_eq!(code, 200);
    let detached_id = body["result"]["snapshotId"].as_str().unwrap().to_owned();
    server.shutdown().await;
    let left = store.get_latest_snapshot("left").await.unwrap().unwrap();
    assert_eq!(left.status, SnapshotStatus::Completed);
    let detached = store.get_snapshot(&detached_id).await.unwrap().unwrap();
    assert_eq!(detached.status, SnapshotStatus::Completed, "{detached:?}");
}

#[tokio::test]
async fn shutdown_is_bounded_by_the_grace_period() {
    let store = memory();
    let mut server = TestServer::start(
        Server::builder()
            .agent(slow(store, Duration::from_secs(60)))
            .shutdown_grace(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
    .await;
    let client = server.client.clone();
    let url = server.url("/agents/slowAgent");
    let _hung = tokio::spawn(async move { client.post(url).json(&json!({"data": user("hi")})).send().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    server.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn sigterm_lets_the_running_turn_finish() {
    let mut child = ChildServer::start("slow", None);
    let client = reqwest::Client::new();
    let url = child.url("/agents/slowAgent");
    let request = tokio::spawn({
        let client = client.clone();
        async move {
            read(
                client
                    .post(url)
                    .json(&json!({"data": user("hi")}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.terminate();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // No new connections once the signal arrived.
    assert!(client.get(child.url("/healthz")).send().await.is_err());
    let (code, body) = request.await.unwrap();
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["message"]["content"][0]["text"], "finally");
    let exit = tokio::task::spawn_blocking(move || child.wait(Duration::from_secs(15)))
        .await
        .unwrap();
    assert_eq!(exit, Some(0));
}
