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

const TELLER_KEY: &str = "k-alice-teller-only-0123456789";

/// Two server-managed agents on one store: `opsAgent` (A), whose
/// `closeAccount` calls wait for approval, and `teller` (B), whose tool of
/// the same name runs at once; alice has a key for everything and one
/// scoped to `teller`.
async fn two_agents() -> (
    Arc<holdpoint::session::InMemoryStore>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    TestServer,
) {
    use holdpoint::agent::Agent;
    use holdpoint::tool::{DynamicTool, ToolContext};
    use holdpoint_server::auth::{AgentScope, ApiKeys};

    let store = memory();
    let a_runs = Arc::new(AtomicUsize::new(0));
    let b_runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&b_runs);
    let ungated = DynamicTool::new(
        "closeAccount",
        "Closes an account at once",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input| {
            let runs = Arc::clone(&counted);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": input}))
            }
        },
    )
    .into_tool();
    let teller = Agent::builder("teller")
        .model(Arc::new(holdpoint::ScriptedModel::from_fn(
            "scripted/teller",
            |_, _| Some(holdpoint::ScriptedTurn::text("the teller did it")),
        )))
        .tools([ungated])
        .store(store.clone())
        .build()
        .unwrap();
    let server = Server::builder()
        .agent(ops(store.clone(), Arc::clone(&a_runs)))
        .agent(teller)
        .api_keys(
            ApiKeys::new()
                .key(ALICE_KEY, "alice")
                .scoped_key(TELLER_KEY, "alice", AgentScope::only(["teller"])),
        )
        .build()
        .unwrap();
    (store, a_runs, b_runs, TestServer::start(server).await)
}

/// A paused call of one agent cannot be resumed, continued, read, aborted
/// or settled through another agent on the same store — by snapshot id,
/// by session id, over SSE or a WebSocket, or through a claim marker's id
/// — even with a key scoped to that other agent only: each is 404
/// `NOT_FOUND` with the message of an unknown id, no tool runs, and the
/// store holds what it held. (Before, `POST /agents/teller` with the
/// paused snapshot's id and a restart of its call ran the teller's
/// ungated `closeAccount`.)
#[tokio::test]
async fn another_agents_paused_call_cannot_be_resumed_through_this_agent() {
    use futures::{SinkExt, StreamExt};
    use holdpoint::session::Snapshot;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let (store, a_runs, b_runs, s) = two_agents().await;
    let (code, body) = s
        .post(
            "/agents/opsAgent",
            json!({"data": user("close acct-1")}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let paused = body["result"].clone();
    assert_eq!(paused["finishReason"], "interrupted", "{paused:#}");
    let snap = paused["snapshotId"].as_str().unwrap().to_owned();
    let session = paused["sessionId"].as_str().unwrap().to_owned();
    let approval = json!({"restart": [restart(&paused_part(&paused), json!({"toolApproved": true}))]});

    // A claim marker row stamped `teller` (in a session of its own, as
    // markers are), holding A's paused conversation.
    let marker_id = "state-claim:0123abcd".to_owned();
    let mut marker = store.get_snapshot(&snap).await.unwrap().unwrap();
    marker.agent = Some("teller".into());
    marker.session_id = marker_id.clone();
    let mut meta = serde_json::Map::new();
    meta.insert("stateClaim".into(), json!(true));
    marker.metadata = Some(meta);
    store
        .save_snapshot(Some(&marker_id), Box::new(move |_| Ok(Some::<Snapshot>(marker))))
        .await
        .unwrap();

    let before = dump(store.as_ref()).await;
    let key = Some(TELLER_KEY);
    let not_found = |got: &(reqwest::StatusCode, Value), message: &str| {
        assert_error(got, 404, "NOT_FOUND", message);
        assert_eq!(got.1["error"]["message"], json!(message), "{:#}", got.1);
    };
    let unknown_snapshot = |id: &str| format!("snapshot {id} not found");
    let unknown_session = format!("session {session} not found");
    for path in ["/agents/teller", "/agents/teller?stream=true"] {
        for id in [snap.as_str(), marker_id.as_str(), "no-such-id"] {
            let resume = json!({"data": {"resume": approval}, "init": {"snapshotId": id}});
            not_found(&s.post(path, resume, key).await, &unknown_snapshot(id));
            let message = json!({"data": user("close acct-1"), "init": {"snapshotId": id}});
            not_found(&s.post(path, message, key).await, &unknown_snapshot(id));
            // Named with its own session, an unseen snapshot is still
            // unknown (not "does not belong").
            let paired = json!({"data": user("close acct-1"), "init": {"snapshotId": id, "sessionId": "elsewhere"}});
            not_found(&s.post(path, paired, key).await, &unknown_snapshot(id));
        }
        let resume = json!({"data": {"resume": approval}, "init": {"sessionId": session}});
        not_found(&s.post(path, resume, key).await, &unknown_session);
        let message = json!({"data": user("close acct-1"), "init": {"sessionId": session}});
        not_found(&s.post(path, message, key).await, &unknown_session);
    }
    for id in [snap.as_str(), marker_id.as_str()] {
        let read = json!({"data": {"snapshotId": id}});
        not_found(
            &s.post("/agents/teller/getSnapshot", read, key).await,
            &unknown_snapshot(id),
        );
        let abort = json!({"data": {"snapshotId": id}});
        not_found(&s.post("/agents/teller/abort", abort, key).await, &unknown_snapshot(id));
        let wait = json!({"data": {"snapshotId": id, "timeoutMs": 10}});
        not_found(
            &s.post("/agents/teller/waitForSnapshot", wait, key).await,
            &unknown_snapshot(id),
        );
        let settle = json!({"data": {"snapshotId": id, "resume": approval}});
        not_found(
            &s.post("/agents/teller/settle", settle, key).await,
            &unknown_snapshot(id),
        );
    }
    let read = json!({"data": {"sessionId": session}});
    not_found(&s.post("/agents/teller/getSnapshot", read, key).await, &unknown_session);
    for listing in ["pending", "inDoubt", "audit"] {
        let got = s
            .get(&format!("/agents/teller/{listing}?sessionId={session}"), key)
            .await;
        not_found(&got, &unknown_session);
        let (code, body) = s.get(&format!("/agents/teller/{listing}"), key).await;
        assert_eq!(code, 200, "{body:#}");
        assert_eq!(body["result"], json!([]), "{listing}: {body:#}");
    }
    // The WebSocket: init on A's snapshot, on A's session, on the marker.
    for init in [
        json!({"snapshotId": snap}),
        json!({"sessionId": session}),
        json!({"snapshotId": marker_id}),
    ] {
        let url = format!("{}/agents/teller/connect", s.base.replace("http://", "ws://"));
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert("x-api-key", TELLER_KEY.parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        ws.send(Message::Text(json!({"init": init}).to_string().into()))
            .await
            .unwrap();
        let frame = loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap() {
                Some(Ok(Message::Text(t))) => break serde_json::from_str::<Value>(t.as_str()).unwrap(),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => panic!("closed without an error frame"),
                Some(Ok(_)) => {}
            }
        };
        assert_eq!(frame["error"]["status"], "NOT_FOUND", "{init}: {frame:#}");
        let expected = match init.get("sessionId") {
            Some(_) => unknown_session.clone(),
            None => unknown_snapshot(init["snapshotId"].as_str().unwrap()),
        };
        assert_eq!(frame["error"]["message"], json!(expected), "{frame:#}");
    }
    // The scoped key cannot reach A directly either.
    let direct = json!({"data": {"resume": approval}, "init": {"snapshotId": snap}});
    assert_eq!(s.post("/agents/opsAgent", direct, key).await.0, 403);

    assert_eq!(a_runs.load(Ordering::SeqCst), 0, "A's tool never ran");
    assert_eq!(b_runs.load(Ordering::SeqCst), 0, "B's tool never ran");
    assert_eq!(dump(store.as_ref()).await, before, "nothing was written");

    // A's call still waits, for A.
    let (code, body) = s.get("/agents/opsAgent/pending", Some(ALICE_KEY)).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"].as_array().unwrap().len(), 1, "{body:#}");
    let resume = json!({"data": {"resume": approval}, "init": {"snapshotId": snap}});
    let (code, body) = s.post("/agents/opsAgent", resume, Some(ALICE_KEY)).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    assert_eq!(a_runs.load(Ordering::SeqCst), 1);
    assert_eq!(b_runs.load(Ordering::SeqCst), 0);
}

/// A new message on a session whose calls wait abandons them: the late
/// approval of the paused snapshot is 409 `ABORTED` ("abandoned by a new
/// message at …"), the tool never runs and nothing is written. (Before,
/// the approval ran the call and forked the session.)
#[tokio::test]
async fn a_late_approval_of_an_abandoned_hold_is_409() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let s = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), Arc::clone(&runs)))
            .build()
            .unwrap(),
    )
    .await;
    let (code, body) = s
        .post("/agents/opsAgent", json!({"data": user("close acct-1")}), None)
        .await;
    assert_eq!(code, 200, "{body:#}");
    let paused = body["result"].clone();
    assert_eq!(paused["finishReason"], "interrupted", "{paused:#}");
    let snap = paused["snapshotId"].as_str().unwrap().to_owned();
    let session = paused["sessionId"].as_str().unwrap().to_owned();
    let approval = json!({"restart": [restart(&paused_part(&paused), json!({"toolApproved": true}))]});

    let chat = json!({"data": user("never mind"), "init": {"sessionId": session}});
    let (code, body) = s.post("/agents/opsAgent", chat, None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    let (code, body) = s
        .get(&format!("/agents/opsAgent/audit?sessionId={session}"), None)
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"][0]["decision"], "abandon", "{body:#}");
    assert_eq!(body["result"][0]["snapshotId"], json!(snap), "{body:#}");

    let before = dump(store.as_ref()).await;
    let late = json!({"data": {"resume": approval}, "init": {"snapshotId": snap}});
    let got = s.post("/agents/opsAgent", late, None).await;
    assert_error(&got, 409, "ABORTED", "abandoned by a new message at");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the abandoned call never ran");
    assert_eq!(dump(store.as_ref()).await, before, "nothing was written");
}
