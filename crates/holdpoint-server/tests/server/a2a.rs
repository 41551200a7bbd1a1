//! `POST /agents/{name}/a2a` and the agent card: A2A 1.0 tasks over real
//! HTTP against the store — a hold is `TASK_STATE_INPUT_REQUIRED`, the
//! answer on the same task resumes it once, answers given elsewhere move
//! the task on, and bad input gets A2A's JSON-RPC errors and changes
//! nothing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use holdpoint::session::SessionStore;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// One JSON-RPC call as `key`.
async fn rpc(s: &TestServer, agent: &str, method: &str, params: Value, key: Option<&str>) -> (StatusCode, Value) {
    let mut req = s
        .client
        .post(s.url(&format!("/agents/{agent}/a2a")))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    if let Some(key) = key {
        req = req.header("x-api-key", key);
    }
    read(req.send().await.unwrap()).await
}

/// A streaming call's frames (each a JSON-RPC response).
async fn rpc_stream(s: &TestServer, agent: &str, method: &str, params: Value) -> Vec<Value> {
    let r = s
        .client
        .post(s.url(&format!("/agents/{agent}/a2a")))
        .header("x-api-key", ALICE_KEY)
        .json(&json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

fn text_message(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    json!({"message": m})
}

fn answer(task: &str, data: Value) -> Value {
    json!({"message": {"messageId": "m-answer", "role": "ROLE_USER", "taskId": task, "parts": [{"data": data}]}})
}

/// The `result.task` of a SendMessage.
#[track_caller]
fn task_of(got: &(StatusCode, Value)) -> Value {
    assert_eq!(got.0, 200, "{:#}", got.1);
    assert!(got.1.get("error").is_none(), "{:#}", got.1);
    got.1["result"]["task"].clone()
}

/// The JSON-RPC error code and ErrorInfo reason.
#[track_caller]
fn error_of(got: &(StatusCode, Value)) -> (i64, String) {
    assert_eq!(got.0, 200, "{:#}", got.1);
    let e = &got.1["error"];
    assert!(e.is_object(), "{:#}", got.1);
    assert_eq!(got.1["id"], 7);
    (
        e["code"].as_i64().unwrap(),
        e["data"][0]["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The hold data parts of a task's status message.
fn holds(task: &Value) -> Vec<Value> {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| p.get("data").cloned()).collect())
        .unwrap_or_default()
}

/// Alice starts a task on opsAgent that waits at one hold.
async fn held(f: &Fixture, context: &str) -> (String, Value) {
    let mut params = text_message("close checking", None);
    params["message"]["contextId"] = json!(context);
    let task = task_of(&rpc(&f.server, "opsAgent", "SendMessage", params, Some(ALICE_KEY)).await);
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task:#}");
    let mut h = holds(&task);
    assert_eq!(h.len(), 1, "{task:#}");
    (task["id"].as_str().unwrap().to_owned(), h.remove(0))
}

#[tokio::test]
async fn the_agent_card_names_the_json_rpc_interface() {
    let f = fixture(true).await;
    let r = f
        .server
        .client
        .get(f.server.url("/agents/opsAgent/.well-known/agent-card.json"))
        .header("x-api-key", ALICE_KEY)
        .send()
        .await
        .unwrap();
    let (code, card) = read(r).await;
    assert_eq!(code, 200, "{card:#}");
    assert_eq!(card["name"], "opsAgent");
    assert_eq!(card["description"], "Closes accounts after a person approves");
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["protocolBinding"], "JSONRPC");
    assert_eq!(iface["protocolVersion"], "1.0");
    assert_eq!(iface["url"], f.server.url("/agents/opsAgent/a2a"));
    assert_eq!(card["capabilities"]["streaming"], true);
    // Authentication as the rest of the API.
    let r = f
        .server
        .client
        .get(f.server.url("/agents/opsAgent/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (code, _) = rpc(&f.server, "opsAgent", "GetTask", json!({"id": "x@0"}), None).await;
    assert_eq!(code, 401);
    let (code, _) = rpc(
        &f.server,
        "bankingAgent",
        "GetTask",
        json!({"id": "x@0"}),
        Some(OPS_KEY),
    )
    .await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn a_hold_is_input_required_with_the_hold_as_a_data_part() {
    let f = fixture(true).await;
    let (id, hold) = held(&f, "c-hold").await;
    assert!(id.starts_with("c-hold@"), "{id}");
    assert_eq!(hold["kind"], "holdpoint.hold");
    assert_eq!(hold["tool"], "closeAccount");
    assert_eq!(hold["input"], json!({"account": "checking"}));
    assert_eq!(hold["reason"], "tool_approval");
    assert_eq!(hold["responseSchema"]["properties"]["toolApproved"]["type"], "boolean");
    assert!(hold["answerSchema"]["properties"]["approve"].is_object(), "{hold:#}");
    let snapshot = hold["snapshotId"].as_str().unwrap();
    assert!(hold["holdId"].as_str().unwrap().starts_with(snapshot));
    let stored = f.store.get_snapshot(snapshot).await.unwrap().unwrap();
    assert_eq!(stored.session_id, "c-hold");
    assert!(stored.is_waiting());
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // GetTask reads the same.
    let got = rpc(&f.server, "opsAgent", "GetTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(
        got.1["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{:#}",
        got.1
    );
    assert_eq!(holds(&got.1["result"])[0]["holdId"], hold["holdId"]);
}

#[tokio::test]
async fn the_answer_on_the_same_task_resumes_exactly_once() {
    let f = fixture(true).await;
    let (id, hold) = held(&f, "c-approve").await;
    let approve = answer(&id, json!({"holdId": hold["holdId"], "approve": true}));
    let task = task_of(&rpc(&f.server, "opsAgent", "SendMessage", approve.clone(), Some(ALICE_KEY)).await);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert_eq!(task["id"], id);
    let text = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("checking"), "{task:#}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
    // The replay: refused, nothing runs or changes.
    let before = dump(f.store.as_ref()).await;
    let got = rpc(&f.server, "opsAgent", "SendMessage", approve, Some(ALICE_KEY)).await;
    assert_eq!(error_of(&got), (-32602, "ALREADY_RESUMED".to_owned()));
    // Without a hold id, a message to a finished task is unsupported.
    let got = rpc(
        &f.server,
        "opsAgent",
        "SendMessage",
        answer(&id, json!({"approve": true})),
        Some(ALICE_KEY),
    )
    .await;
    assert_eq!(error_of(&got).0, -32004);
    assert_eq!(dump(f.store.as_ref()).await, before);
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
    // The context goes on with a new task.
    let mut next = text_message("close savings", None);
    next["message"]["contextId"] = json!("c-approve");
    let task = task_of(&rpc(&f.server, "opsAgent", "SendMessage", next, Some(ALICE_KEY)).await);
    assert_ne!(task["id"], id);
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // The first task still reads completed.
    let got = rpc(&f.server, "opsAgent", "GetTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(
        got.1["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{:#}",
        got.1
    );
}

#[tokio::test]
async fn deny_and_edit_map_onto_the_decision_path() {
    let f = fixture(true).await;
    let (id, _) = held(&f, "c-deny").await;
    // One hold open: the hold id may be left out.
    let task = task_of(
        &rpc(
            &f.server,
            "opsAgent",
            "SendMessage",
            answer(&id, json!({"deny": "not today"})),
            Some(ALICE_KEY),
        )
        .await,
    );
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert!(
        task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not today"),
        "{task:#}"
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // Approve with an edited input: ToolApproval asks again for the new input.
    let (id, hold) = held(&f, "c-edit").await;
    let edit = answer(
        &id,
        json!({"holdId": hold["holdId"], "approve": true, "input": {"account": "savings"}}),
    );
    let task = task_of(&rpc(&f.server, "opsAgent", "SendMessage", edit, Some(ALICE_KEY)).await);
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task:#}");
    assert_eq!(holds(&task)[0]["input"], json!({"account": "savings"}));
    let task = task_of(
        &rpc(
            &f.server,
            "opsAgent",
            "SendMessage",
            answer(&id, json!({"approve": true})),
            Some(ALICE_KEY),
        )
        .await,
    );
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert!(
        task["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("savings")
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_input_gets_the_protocols_error_and_changes_nothing() {
    let f = fixture(true).await;
    let (id, hold) = held(&f, "c-bad").await;
    let before = dump(f.store.as_ref()).await;
    let call = |method: &'static str, params: Value, key: &'static str| {
        let s = &f.server;
        async move { error_of(&rpc(s, "opsAgent", method, params, Some(key)).await) }
    };
    // Unknown and foreign task ids: task not found.
    assert_eq!(call("GetTask", json!({"id": "nope"}), ALICE_KEY).await.0, -32001);
    assert_eq!(call("GetTask", json!({"id": "c-bad@nope"}), ALICE_KEY).await.0, -32001);
    assert_eq!(call("GetTask", json!({"id": id}), BOB_KEY).await.0, -32001);
    let approve = answer(&id, json!({"approve": true}));
    assert_eq!(call("SendMessage", approve.clone(), BOB_KEY).await.0, -32001);
    assert_eq!(call("CancelTask", json!({"id": id}), BOB_KEY).await.0, -32001);
    // Schema mismatch, an unknown hold, a malformed answer.
    let mismatch = answer(&id, json!({"respond": {"toolApproved": "yes"}}));
    assert_eq!(
        call("SendMessage", mismatch, ALICE_KEY).await,
        (-32602, "SCHEMA_MISMATCH".to_owned())
    );
    let unknown = answer(
        &id,
        json!({"holdId": format!("{}#other", hold["snapshotId"].as_str().unwrap()), "approve": true}),
    );
    assert_eq!(
        call("SendMessage", unknown, ALICE_KEY).await,
        (-32602, "UNKNOWN_INTERRUPT".to_owned())
    );
    let both = answer(&id, json!({"approve": true, "deny": "no"}));
    assert_eq!(call("SendMessage", both, ALICE_KEY).await.0, -32602);
    let text_only = text_message("yes please", Some(&id));
    assert_eq!(
        call("SendMessage", text_only, ALICE_KEY).await,
        (-32602, "HOLDS_PENDING".to_owned())
    );
    // New input in the context while the task waits.
    let mut fresh = text_message("close savings", None);
    fresh["message"]["contextId"] = json!("c-bad");
    assert_eq!(
        call("SendMessage", fresh, ALICE_KEY).await,
        (-32602, "HOLDS_PENDING".to_owned())
    );
    // Protocol errors.
    assert_eq!(call("NoSuchMethod", json!({}), ALICE_KEY).await.0, -32601);
    assert_eq!(
        call("CreateTaskPushNotificationConfig", json!({}), ALICE_KEY).await.0,
        -32003
    );
    let r = f
        .server
        .client
        .post(f.server.url("/agents/opsAgent/a2a"))
        .header("x-api-key", ALICE_KEY)
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (_, body) = read(r).await;
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(dump(f.store.as_ref()).await, before);
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // Alice's answer still works.
    let task = task_of(&rpc(&f.server, "opsAgent", "SendMessage", approve, Some(ALICE_KEY)).await);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancel_denies_the_holds_and_the_task_reads_canceled() {
    let f = fixture(true).await;
    let (id, _) = held(&f, "c-cancel").await;
    let got = rpc(&f.server, "opsAgent", "CancelTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(got.1["result"]["status"]["state"], "TASK_STATE_CANCELED", "{:#}", got.1);
    let got = rpc(&f.server, "opsAgent", "GetTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(got.1["result"]["status"]["state"], "TASK_STATE_CANCELED", "{:#}", got.1);
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    let got = rpc(&f.server, "opsAgent", "CancelTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(error_of(&got).0, -32002);
}

#[tokio::test]
async fn an_answer_given_elsewhere_moves_the_task_on_and_subscribers_see_it() {
    let f = fixture(true).await;
    let (id, hold) = held(&f, "c-elsewhere").await;
    // Subscribe first.
    let r = f
        .server
        .client
        .post(f.server.url("/agents/opsAgent/a2a"))
        .header("x-api-key", ALICE_KEY)
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("TASK_STATE_INPUT_REQUIRED") {
        seen.push_str(&String::from_utf8_lossy(&body.next().await.unwrap().unwrap()));
    }
    // The owner answers through the API's answer route, not A2A.
    let r = f
        .server
        .client
        .post(f.server.url("/agents/opsAgent/answer"))
        .header("x-api-key", ALICE_KEY)
        .json(&json!({"data": {"snapshotId": hold["snapshotId"], "ref": hold["ref"], "decision": "approve"}}))
        .send()
        .await
        .unwrap();
    let (code, out) = read(r).await;
    assert_eq!(code, 200, "{out:#}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains("TASK_STATE_COMPLETED") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("the subscriber hears the task complete")
            .expect("the stream stays open until then")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let frames: Vec<Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert!(frames[0]["result"]["task"]["id"] == id, "{frames:#?}");
    let last = frames.last().unwrap();
    assert_eq!(last["result"]["statusUpdate"]["taskId"], id);
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // The stream ends with the task.
    assert!(
        tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .unwrap()
            .is_none()
    );
    // And GetTask agrees.
    let got = rpc(&f.server, "opsAgent", "GetTask", json!({"id": id}), Some(ALICE_KEY)).await;
    assert_eq!(got.1["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_streaming_send_reports_the_task_then_its_pause_and_its_end() {
    let f = fixture(true).await;
    let frames = rpc_stream(
        &f.server,
        "opsAgent",
        "SendStreamingMessage",
        text_message("close checking", None),
    )
    .await;
    let first = &frames[0]["result"]["task"];
    assert_eq!(first["status"]["state"], "TASK_STATE_WORKING", "{frames:#?}");
    let id = first["id"].as_str().unwrap().to_owned();
    let last = &frames.last().unwrap()["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{frames:#?}");
    let hold = holds(last)[0].clone();
    assert_eq!(hold["tool"], "closeAccount");
    let frames = rpc_stream(
        &f.server,
        "opsAgent",
        "SendStreamingMessage",
        answer(&id, json!({"holdId": hold["holdId"], "approve": true})),
    )
    .await;
    let last = &frames.last().unwrap()["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{frames:#?}");
    assert!(
        frames
            .iter()
            .any(|f| f["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("checking"))),
        "{frames:#?}"
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
    // A replayed streaming answer: the JSON-RPC error, nothing runs.
    let frames = rpc_stream(
        &f.server,
        "opsAgent",
        "SendStreamingMessage",
        answer(&id, json!({"holdId": hold["holdId"], "approve": true})),
    )
    .await;
    assert!(frames.is_empty(), "{frames:#?}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

/// The Python interpreter of the venv `.ci/run` installs the official
/// SDK into (`HOLDPOINT_A2A_PYTHON` overrides it).
fn sdk_python() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("HOLDPOINT_A2A_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/var/tmp/holdpoint-a2a-py/bin/python".into());
    let ok = python.is_file()
        && std::process::Command::new(&python)
            .args(["-c", "import a2a.client"])
            .output()
            .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

/// The official Python SDK (`a2a-sdk`, its client factory and JSON-RPC
/// transport, driven by `tests/a2a/client.py`) against the endpoint.
/// Skipped (with a message) when the SDK is missing, unless `CI=true`:
/// `.ci/run` installs it from `tests/a2a/requirements.txt`.
#[tokio::test]
async fn the_official_python_sdk_runs_holds_answers_and_cancels() {
    let Some(python) = sdk_python() else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "a2a-sdk is required in CI (python3 -m venv /var/tmp/holdpoint-a2a-py && /var/tmp/holdpoint-a2a-py/bin/pip install -r crates/holdpoint-server/tests/a2a/requirements.txt)"
        );
        eprintln!(
            "SKIPPED: install the SDK: python3 -m venv /var/tmp/holdpoint-a2a-py && /var/tmp/holdpoint-a2a-py/bin/pip install -r crates/holdpoint-server/tests/a2a/requirements.txt"
        );
        return;
    };
    let f = fixture(true).await;
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a");
    let output = tokio::process::Command::new(python)
        .arg("client.py")
        .arg(&f.server.base)
        .arg(ALICE_KEY)
        .current_dir(&dir)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the client finished within 120 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // The card resolved, and a hold is input-required with its data part.
    assert_eq!(out["card"]["name"], "opsAgent", "{out:#}");
    assert_eq!(out["first"]["state"], "TASK_STATE_INPUT_REQUIRED", "{out:#}");
    assert_eq!(out["first"]["holds"][0]["tool"], "closeAccount", "{out:#}");
    assert_eq!(out["got"]["state"], "TASK_STATE_INPUT_REQUIRED", "{out:#}");
    // The answer on the same task: completed, once.
    assert_eq!(out["approved"]["state"], "TASK_STATE_COMPLETED", "{out:#}");
    assert!(
        out["approved"]["text"].as_str().unwrap().contains("checking"),
        "{out:#}"
    );
    assert_eq!(out["replayed"]["error"]["type"], "InvalidParamsError", "{out:#}");
    assert!(
        out["replayed"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("answered already"),
        "{out:#}"
    );
    assert_eq!(out["unknown"]["error"]["type"], "TaskNotFoundError", "{out:#}");
    // Cancel; schema mismatch then deny.
    assert_eq!(out["cancelled"]["state"], "TASK_STATE_CANCELED", "{out:#}");
    assert_eq!(out["mismatch"]["error"]["type"], "InvalidParamsError", "{out:#}");
    assert_eq!(out["denied"]["state"], "TASK_STATE_COMPLETED", "{out:#}");
    assert!(out["denied"]["text"].as_str().unwrap().contains("not today"), "{out:#}");
    // Answered through the API's answer route: the subscriber saw it.
    assert_eq!(out["answeredElsewhere"], 200, "{out:#}");
    let seen = out["subscribed"].as_array().unwrap();
    assert_eq!(seen.first().unwrap(), "TASK_STATE_INPUT_REQUIRED", "{out:#}");
    assert_eq!(seen.last().unwrap(), "TASK_STATE_COMPLETED", "{out:#}");
    // Exactly two closings ran: the approved one and the one approved elsewhere.
    assert_eq!(f.runs.load(Ordering::SeqCst), 2);
}
