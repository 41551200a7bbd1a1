//! Multi-turn connections over a WebSocket.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::support::*;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open(s: &TestServer, agent: &str, headers: &[(&str, &str)]) -> Result<Socket, tungstenite::Error> {
    let url = format!("{}/agents/{agent}/connect", s.base.replace("http://", "ws://"));
    let mut request = url.into_client_request().unwrap();
    for (k, v) in headers {
        let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap();
        request.headers_mut().insert(name, v.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request).await.map(|(ws, _)| ws)
}

async fn send(ws: &mut Socket, value: Value) {
    ws.send(Message::Text(value.to_string().into())).await.unwrap();
}

/// The next JSON frame, or the close code.
async fn next(ws: &mut Socket) -> Result<Value, Option<u16>> {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s");
        match message {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| u16::from(f.code))),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

/// Frames up to and including the next `turnEnd`.
async fn turn(ws: &mut Socket) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let frame = next(ws).await.unwrap();
        let end = frame["message"]["turnEnd"].is_object();
        frames.push(frame);
        if end {
            return frames;
        }
    }
}

#[tokio::test]
async fn a_connection_pauses_resumes_and_closes_with_its_output() {
    let f = fixture(false).await;
    let mut ws = open(&f.server, "bankingAgent", &[]).await.unwrap();
    send(&mut ws, json!({"init": {}})).await;
    send(&mut ws, user("Transfer $500 to savings")).await;
    let frames = turn(&mut ws).await;
    assert_eq!(
        frames.last().unwrap()["message"]["turnEnd"]["finishReason"],
        "interrupted"
    );
    let hold = frames
        .iter()
        .find(|f| f["message"]["modelChunk"]["role"] == "tool")
        .expect("the hold is streamed");
    let part = hold["message"]["modelChunk"]["content"][0].clone();

    // A malformed input is answered and the connection stays.
    send(&mut ws, json!({"mesage": 1})).await;
    let err = next(&mut ws).await.unwrap();
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT", "{err:#}");

    send(
        &mut ws,
        json!({"data": {"resume": {"restart": [restart(&part, json!({"approved": true}))]}}}),
    )
    .await;
    let frames = turn(&mut ws).await;
    assert_eq!(frames.last().unwrap()["message"]["turnEnd"]["finishReason"], "stop");

    send(&mut ws, user("what is my balance")).await;
    let frames = turn(&mut ws).await;
    assert_eq!(frames.last().unwrap()["message"]["turnEnd"]["finishReason"], "stop");

    send(&mut ws, json!({"close": true})).await;
    let out = next(&mut ws).await.unwrap();
    assert_eq!(out["result"]["finishReason"], "stop", "{out:#}");
    assert!(
        out["result"]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("balance")
    );
    assert_eq!(next(&mut ws).await, Err(Some(1000)));
    let session = out["result"]["sessionId"].as_str().unwrap();
    let latest = f
        .server
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"sessionId": session}}),
            None,
        )
        .await;
    assert_eq!(
        latest.1["result"]["state"]["messages"].as_array().unwrap().len(),
        8,
        "{:#}",
        latest.1
    );
}

#[tokio::test]
async fn init_errors_close_the_socket_with_4000_plus_the_http_code() {
    let f = fixture(false).await;
    let mut ws = open(&f.server, "bankingAgent", &[]).await.unwrap();
    send(&mut ws, json!({"init": {"snapshotId": "missing"}})).await;
    let err = next(&mut ws).await.unwrap();
    assert_eq!(err["error"]["status"], "NOT_FOUND");
    assert_eq!(next(&mut ws).await, Err(Some(4404)));

    let mut ws = open(&f.server, "bankingAgent", &[]).await.unwrap();
    send(&mut ws, json!({"init": {"sesionId": "typo"}})).await;
    let err = next(&mut ws).await.unwrap();
    assert!(
        err["error"]["message"].as_str().unwrap().contains("sesionId"),
        "{err:#}"
    );
    assert_eq!(next(&mut ws).await, Err(Some(4400)));
}

#[tokio::test]
async fn a_lost_claim_is_reported_as_aborted() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    let out = body["result"].clone();
    let approve = restart(&paused_part(&out), json!({"approved": true}));
    let (code, _) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"restart": [approve.clone()]}}, "init": {"snapshotId": out["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200);
    let mut ws = open(s, "bankingAgent", &[]).await.unwrap();
    send(&mut ws, json!({"init": {"snapshotId": out["snapshotId"]}})).await;
    send(&mut ws, json!({"resume": {"restart": [approve]}})).await;
    let frames = turn(&mut ws).await;
    assert_eq!(frames.last().unwrap()["message"]["turnEnd"]["finishReason"], "failed");
    let err = next(&mut ws).await.unwrap();
    assert_eq!(err["error"]["status"], "ABORTED", "{err:#}");
    assert_eq!(next(&mut ws).await, Err(Some(4409)));
}

#[tokio::test]
async fn upgrades_are_authenticated_and_same_origin() {
    let f = fixture(true).await;
    match open(&f.server, "bankingAgent", &[]).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("expected 401, got {:?}", other.map(|_| ())),
    }
    match open(&f.server, "bankingAgent", &[("x-api-key", OPS_KEY)]).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!("expected 403, got {:?}", other.map(|_| ())),
    }
    match open(
        &f.server,
        "bankingAgent",
        &[("x-api-key", ALICE_KEY), ("origin", "https://evil.example")],
    )
    .await
    {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403),
        other => panic!("expected 403, got {:?}", other.map(|_| ())),
    }
    let mut ws = open(&f.server, "bankingAgent", &[("x-api-key", ALICE_KEY)])
        .await
        .unwrap();
    send(&mut ws, json!({})).await;
    send(&mut ws, user("Transfer $1 to bob")).await;
    let frames = turn(&mut ws).await;
    let end = &frames.last().unwrap()["message"]["turnEnd"];
    assert_eq!(end["finishReason"], "interrupted");
    let snapshot = f
        .server
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": end["snapshotId"]}}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(snapshot.1["result"]["owner"], "alice");
    let hidden = f
        .server
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": end["snapshotId"]}}),
            Some(BOB_KEY),
        )
        .await;
    assert_eq!(hidden.0, 404);
}

#[tokio::test]
async fn a_client_that_leaves_mid_turn_loses_nothing() {
    let store = memory();
    let server = TestServer::start(
        holdpoint_server::Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(300)))
            .build()
            .unwrap(),
    )
    .await;
    let mut ws = open(&server, "slowAgent", &[]).await.unwrap();
    send(&mut ws, json!({"init": {"sessionId": "ws-leaver"}})).await;
    send(&mut ws, user("hi")).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(ws);
    tokio::time::sleep(Duration::from_millis(600)).await;
    use holdpoint::session::SessionStore;
    let latest = store
        .get_latest_snapshot("ws-leaver")
        .await
        .unwrap()
        .expect("persisted");
    assert_eq!(latest.state.unwrap().messages.last().unwrap().text(), "finally");
}

#[tokio::test]
async fn messages_over_the_limit_close_the_connection() {
    let server = TestServer::start(
        holdpoint_server::Server::builder()
            .agent(bank(memory()))
            .body_limit(4096)
            .build()
            .unwrap(),
    )
    .await;
    let mut ws = open(&server, "bankingAgent", &[]).await.unwrap();
    send(&mut ws, json!({})).await;
    let _ = ws
        .send(Message::Text(user(&"x".repeat(10_000)).to_string().into()))
        .await;
    let end = next(&mut ws).await;
    assert!(end.is_err(), "the connection ends: {end:?}");
    // The server is fine.
    assert_eq!(server.get("/healthz", None).await.0, 200);
}

#[tokio::test]
async fn shutdown_finishes_the_running_turn_and_sends_the_output() {
    let store = memory();
    let mut server = TestServer::start(
        holdpoint_server::Server::builder()
            .agent(slow(store, Duration::from_millis(400)))
            .build()
            .unwrap(),
    )
    .await;
    let mut ws = open(&server, "slowAgent", &[]).await.unwrap();
    send(&mut ws, json!({})).await;
    send(&mut ws, user("hi")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = server.stop_signal();
    let _ = stop.send(());
    let frames = turn(&mut ws).await;
    assert_eq!(frames.last().unwrap()["message"]["turnEnd"]["finishReason"], "stop");
    let out = next(&mut ws).await.unwrap();
    assert_eq!(out["result"]["message"]["content"][0]["text"], "finally", "{out:#}");
    assert_eq!(next(&mut ws).await, Err(Some(1000)));
    tokio::time::timeout(Duration::from_secs(5), server.take_task())
        .await
        .expect("serve returns once the connection is done")
        .unwrap()
        .unwrap();
}
