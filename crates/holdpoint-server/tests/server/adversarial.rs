//! Attacks the other modules leave out: slow clients, huge strings and
//! deep nesting in valid places, stale and unknown refs, abort racing a
//! detached run's completion. Each is answered with its documented status
//! and a JSON error, and the store holds what it held before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use holdpoint::session::{SessionStore, SnapshotStatus};
use holdpoint_server::Server;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_owned()
}

/// Reads one HTTP response (head and a Content-Length body) from `stream`.
async fn read_response(stream: &mut TcpStream) -> (u16, Value) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("the server answers a stalled client")
            .unwrap();
        assert!(
            n > 0,
            "connection closed without a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= length {
                let code = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (code, serde_json::from_str(&body[..length]).unwrap());
            }
        }
    }
}

const HEAD: &str = "POST /agents/bankingAgent HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n";

#[tokio::test]
async fn slow_clients_get_408_and_never_hold_up_others() {
    let store = memory();
    let s = TestServer::start(
        Server::builder()
            .agent(bank(store.clone()))
            .request_timeout(Some(Duration::from_millis(400)))
            .build()
            .unwrap(),
    )
    .await;
    // One client sends half a body and stops; another dribbles a byte at a time.
    let mut stalled = TcpStream::connect(addr(&s)).await.unwrap();
    stalled
        .write_all(format!("{HEAD}{{\"data\": ").as_bytes())
        .await
        .unwrap();
    let mut dribbler = TcpStream::connect(addr(&s)).await.unwrap();
    dribbler.write_all(HEAD.as_bytes()).await.unwrap();
    let dribble = tokio::spawn(async move {
        for b in b"{\"data\": {\"message\"" {
            if dribbler.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        dribbler
    });
    // Meanwhile everyone else is served at once.
    let started = Instant::now();
    for _ in 0..5 {
        let (code, body) = s
            .post("/agents/bankingAgent", json!({"data": user("hello")}), None)
            .await;
        assert_eq!(code, 200, "{body:#}");
    }
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    let before = dump(store.as_ref()).await;

    let (code, body) = read_response(&mut stalled).await;
    assert_eq!(code, 408, "{body:#}");
    assert_eq!(body["error"]["status"], "DEADLINE_EXCEEDED", "{body:#}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("400 ms"),
        "{body:#}"
    );
    let mut dribbler = dribble.await.unwrap();
    let (code, body) = read_response(&mut dribbler).await;
    assert_eq!(code, 408, "{body:#}");
    assert_eq!(body["error"]["status"], "DEADLINE_EXCEEDED");
    assert_eq!(dump(store.as_ref()).await, before, "timed-out requests write nothing");
    let text = s.metrics().await;
    assert_eq!(
        sample(
            &text,
            "holdpoint_http_errors_total",
            &[("code", "408"), ("status", "DEADLINE_EXCEEDED")]
        ),
        2.0,
        "{text}"
    );
}

#[tokio::test]
async fn huge_strings_and_deep_nesting_where_values_are_allowed() {
    let f = fixture(false).await;
    let s = &f.server;
    let path = "/agents/bankingAgent";
    // A text just under the 1 MiB body limit is an ordinary turn.
    let (code, body) = s.post(path, json!({"data": user(&"é".repeat(450_000))}), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_ne!(body["result"]["finishReason"], "failed", "{body:#}");

    let (snapshot, part) = {
        let (code, body) = s
            .post(path, json!({"data": user("Transfer $500 to savings")}), None)
            .await;
        assert_eq!(code, 200, "{body:#}");
        let out = body["result"].clone();
        (out["snapshotId"].as_str().unwrap().to_owned(), paused_part(&out))
    };
    let before = dump(f.store.as_ref()).await;
    // Huge ids: not found, not a crash.
    let huge = "s".repeat(900_000);
    let got = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": huge}}),
            None,
        )
        .await;
    assert_error(&got, 404, "NOT_FOUND", "");
    let got = s
        .post(path, json!({"data": user("hi"), "init": {"snapshotId": huge}}), None)
        .await;
    assert_error(&got, 404, "NOT_FOUND", "");
    let got = s
        .post(
            "/agents/bankingAgent/abort",
            json!({"data": {"snapshotId": huge}}),
            None,
        )
        .await;
    assert_error(&got, 404, "NOT_FOUND", "");
    // Resume data nested deeper than the parser allows: 400 before anything runs.
    let nested = format!(
        r#"{{"data": {{"resume": {{"restart": [{{"toolRequest": {}, "metadata": {{"resumed": {{"approved": {}true{}}}}}}}]}}}}, "init": {{"snapshotId": "{snapshot}"}}}}"#,
        part["toolRequest"],
        "[".repeat(200),
        "]".repeat(200)
    );
    let got = s.post_raw(path, "application/json", nested.into_bytes()).await;
    assert_error(&got, 400, "INVALID_ARGUMENT", "");
    // A huge reason within the limit is refused or recorded, never a 5xx;
    // a refusal leaves the store as it was.
    let mut shouting = restart(&part, json!({"approved": false}));
    shouting["metadata"]["resumed"]["reason"] = json!("!".repeat(2_000_000));
    let got = s
        .post(
            path,
            json!({"data": {"resume": {"restart": [shouting]}}, "init": {"snapshotId": snapshot}}),
            None,
        )
        .await;
    assert_error(&got, 413, "RESOURCE_EXHAUSTED", "limit");
    assert_eq!(dump(f.store.as_ref()).await, before);
}

#[tokio::test]
async fn stale_and_unknown_refs_are_refused_and_change_nothing() {
    let f = fixture(false).await;
    let s = &f.server;
    let path = "/agents/opsAgent";
    let (_, body) = s.post(path, json!({"data": user("close a-1")}), None).await;
    let first = body["result"].clone();
    let first_part = paused_part(&first);
    let approve = |part: &Value, snapshot: &Value| json!({"data": {"resume": {"restart": [restart(part, json!({"toolApproved": true}))]}}, "init": {"snapshotId": snapshot}});
    let (code, body) = s.post(path, approve(&first_part, &first["snapshotId"]), None).await;
    assert_eq!(code, 200, "{body:#}");
    let session = first["sessionId"].clone();
    let (_, body) = s
        .post(
            path,
            json!({"data": user("close a-2"), "init": {"sessionId": session}}),
            None,
        )
        .await;
    let second = body["result"].clone();
    assert_eq!(second["finishReason"], "interrupted", "{second:#}");
    let second_part = paused_part(&second);
    let runs = f.runs.load(std::sync::atomic::Ordering::SeqCst);
    let before = dump(f.store.as_ref()).await;

    // The first turn's call, answered at the second turn's snapshot.
    let stale = approve(&first_part, &second["snapshotId"]);
    // A ref nobody issued.
    let mut unknown_part = second_part.clone();
    unknown_part["toolRequest"]["ref"] = json!("no-such-ref");
    let unknown = approve(&unknown_part, &second["snapshotId"]);
    // A respond for a ref nobody issued.
    let respond = json!({"data": {"resume": {"respond": [{"toolResponse": {"name": "closeAccount", "ref": "no-such-ref", "output": {"closed": "a-2"}}}]}},
                         "init": {"snapshotId": second["snapshotId"]}});
    // The first snapshot again (already answered): the claim is gone.
    let replayed = approve(&first_part, &first["snapshotId"]);
    for (what, request) in [
        ("stale", stale),
        ("unknown", unknown),
        ("respond", respond),
        ("replayed", replayed),
    ] {
        let (code, body) = s.post(path, request, None).await;
        let refused = (code.as_u16() >= 400 && body["error"]["status"].is_string())
            || (code == 200 && body["result"]["finishReason"] == "failed");
        assert!(refused, "{what}: {code} {body:#}");
        assert!(code.as_u16() < 500, "{what}: {code} {body:#}");
        assert_eq!(dump(f.store.as_ref()).await, before, "{what} changed the store");
    }
    assert_eq!(
        f.runs.load(std::sync::atomic::Ordering::SeqCst),
        runs,
        "no refused answer ran the tool"
    );
    // The genuine answer still goes through.
    let (code, body) = s.post(path, approve(&second_part, &second["snapshotId"]), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
}

#[tokio::test]
async fn abort_racing_a_detached_run_settles_once() {
    let store = memory();
    let s = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(400)))
            .build()
            .unwrap(),
    )
    .await;
    let mut tasks = Vec::new();
    // Runs take 400 ms and aborts come 0 – 800 ms after the detach reply:
    // wide enough that a loaded machine still exercises both sides.
    for i in 0..24u64 {
        let client = s.client.clone();
        let base = s.base.clone();
        tasks.push(tokio::spawn(async move {
            let mut input = user("work");
            input["detach"] = json!(true);
            let r = client
                .post(format!("{base}/agents/slowAgent"))
                .json(&json!({"data": input}))
                .send()
                .await
                .unwrap();
            let (code, body) = read(r).await;
            assert_eq!(code, 200, "{body:#}");
            let id = body["result"]["snapshotId"].as_str().unwrap().to_owned();
            // Abort anywhere from before to after the run's end.
            tokio::time::sleep(Duration::from_millis(i * 35)).await;
            let r = client
                .post(format!("{base}/agents/slowAgent/abort"))
                .json(&json!({"data": {"snapshotId": id}}))
                .send()
                .await
                .unwrap();
            let (code, body) = read(r).await;
            assert_eq!(code, 200, "{body:#}");
            (id, body["result"].clone())
        }));
    }
    let mut aborted = 0;
    for t in tasks {
        let (id, result) = t.await.unwrap();
        let final_status = loop {
            let snap = store.get_snapshot(&id).await.unwrap().unwrap();
            if !matches!(snap.status, SnapshotStatus::Pending | SnapshotStatus::Aborting) {
                break snap.status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        match result["previousStatus"].as_str().unwrap() {
            "pending" => {
                aborted += 1;
                assert_eq!(final_status, SnapshotStatus::Aborted, "{result:#}");
            }
            "completed" => assert_eq!(final_status, SnapshotStatus::Completed, "{result:#}"),
            other => panic!("unexpected previous status {other}: {result:#}"),
        }
        assert_eq!(
            result["status"],
            json!(final_status.as_str()),
            "the reply tells the final status"
        );
    }
    // Both sides of the race were exercised, each run settled exactly once.
    assert!(aborted > 0, "no abort won the race");
    let all = dump(store.as_ref()).await.0;
    let statuses: Vec<_> = all.iter().map(|s| (s.snapshot_id.clone(), s.status)).collect();
    assert_eq!(all.len(), 24, "one snapshot per run: {statuses:?}");
}

/// Client-held state that was already resumed, sent again with the same
/// approval: the server claimed the signed state before the tool ran, so
/// the replay is 409 "already resumed" and the approved call ran once. An
/// altered copy is 403 and claims nothing; the claims store holds what it
/// held before each refusal.
#[tokio::test]
async fn replayed_signed_state_is_refused() {
    let runs = Arc::new(AtomicUsize::new(0));
    let claims = memory();
    let s = TestServer::start(
        Server::builder()
            .agent(ops_client_managed("opsAgent", Arc::clone(&runs)))
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .state_claims(claims.clone())
            .build()
            .unwrap(),
    )
    .await;
    let path = "/agents/opsAgent";
    let (code, body) = s.post(path, json!({"data": user("close acct-1")}), None).await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    assert_eq!(out["finishReason"], "interrupted", "{out:#}");
    let state = out["state"].clone();
    assert!(state["signature"].is_object());
    let approve = |state: &Value| {
        json!({"data": {"resume": {"restart": [restart(&paused_part(&out), json!({"toolApproved": true}))]}},
               "init": {"state": state}})
    };

    // Altered state: refused before anything is claimed.
    let mut altered = state.clone();
    altered["sessionId"] = json!("someone-else");
    let got = s.post(path, approve(&altered), None).await;
    assert_error(&got, 403, "PERMISSION_DENIED", "altered");
    assert_eq!(dump(claims.as_ref()).await.0.len(), 0);

    let (code, first) = s.post(path, approve(&state), None).await;
    assert_eq!(code, 200, "{first:#}");
    assert_eq!(first["result"]["finishReason"], "stop", "{first:#}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let before = dump(claims.as_ref()).await;
    assert_eq!(before.0.len(), 1, "one claim marker");
    assert!(before.0[0].snapshot_id.starts_with("state-claim:"));

    // The same signed state and approval again, also re-serialised by a client.
    let replay = s.post(path, approve(&state), None).await;
    assert_error(&replay, 409, "ABORTED", "already resumed");
    let text = serde_json::to_string(&state).unwrap();
    let reparsed: Value = serde_json::from_str(&text).unwrap();
    let replay = s.post(path, approve(&reparsed), None).await;
    assert_error(&replay, 409, "ABORTED", "already resumed");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the approved call ran once");
    assert_eq!(
        dump(claims.as_ref()).await,
        before,
        "the store holds what it held before"
    );

    // The state the resume returned goes on as usual.
    let next = first["result"]["state"].clone();
    let (code, body) = s
        .post(
            path,
            json!({"data": user("close acct-2"), "init": {"state": next}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted");
}

/// Without `state_claims`, a server that also serves a server-managed
/// agent claims signed state in that agent's (durable) store.
#[tokio::test]
async fn signed_state_is_claimed_in_the_server_managed_store_by_default() {
    let runs = Arc::new(AtomicUsize::new(0));
    let store = memory();
    let s = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), Arc::new(AtomicUsize::new(0))))
            .agent(ops_client_managed("clientOps", Arc::clone(&runs)))
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let path = "/agents/clientOps";
    let (code, body) = s.post(path, json!({"data": user("close acct-9")}), None).await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    let approve = json!({"data": {"resume": {"restart": [restart(&paused_part(&out), json!({"toolApproved": true}))]}},
                         "init": {"state": out["state"]}});
    let (code, first) = s.post(path, approve.clone(), None).await;
    assert_eq!(code, 200, "{first:#}");
    let rows = dump(store.as_ref()).await.0;
    assert!(
        rows.iter().any(|r| r.snapshot_id.starts_with("state-claim:")),
        "the claim is in the server-managed store: {rows:#?}"
    );
    let replay = s.post(path, approve, None).await;
    assert_error(&replay, 409, "ABORTED", "already resumed");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
