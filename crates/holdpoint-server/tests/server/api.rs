//! The JSON routes: turns, resumes, snapshots, abort, listings, health and
//! the OpenAPI document.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use holdpoint::session::{SessionStore, SnapshotStatus};
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn a_turn_pauses_and_a_resume_by_snapshot_completes_it() {
    let f = fixture(false).await;
    let s = &f.server;
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let out = &body["result"];
    assert_eq!(out["finishReason"], "interrupted");
    let snapshot = out["snapshotId"].as_str().unwrap().to_owned();
    let part = paused_part(out);
    assert_eq!(part["toolRequest"]["name"], "transferMoney");

    let resume = json!({
        "data": {"resume": {"restart": [restart(&part, json!({"approved": true}))]}},
        "init": {"snapshotId": snapshot},
    });
    let (code, body) = s.post("/agents/bankingAgent", resume.clone(), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop");
    assert_eq!(body["result"]["message"]["content"][0]["text"], "Done: txn-123");

    // The same approval again loses the exactly-once claim: 409.
    let again = s.post("/agents/bankingAgent", resume, None).await;
    assert_error(&again, 409, "ABORTED", "already resumed");
}

#[tokio::test]
async fn resume_by_session_id_and_respond() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $20 to bob")}),
            None,
        )
        .await;
    let session = body["result"]["sessionId"].as_str().unwrap().to_owned();
    let part = paused_part(&body["result"]);
    let respond = json!({
        "toolResponse": {"name": "transferMoney", "ref": part["toolRequest"]["ref"], "output": {"success": true, "transactionId": "manual-1"}},
        "metadata": {"interruptResponse": true}
    });
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"respond": [respond]}}, "init": {"sessionId": session}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["message"]["content"][0]["text"], "Done: manual-1");
    assert_eq!(body["result"]["sessionId"], json!(session));
}

#[tokio::test]
async fn a_failed_turn_is_200_with_finish_reason_failed_and_writes_nothing() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/bankingAgent", json!({"data": user("Transfer $5 to x")}), None)
        .await;
    let snapshot = body["result"]["snapshotId"].as_str().unwrap().to_owned();
    let before = dump(f.store.as_ref()).await;
    // A restart naming a call that is not pending: resume validation fails.
    let bogus =
        json!({"toolRequest": {"name": "transferMoney", "ref": "nope", "input": {}}, "metadata": {"resumed": true}});
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"restart": [bogus]}}, "init": {"snapshotId": snapshot}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "failed");
    assert_eq!(body["result"]["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        dump(f.store.as_ref()).await,
        before,
        "a failed validation writes nothing"
    );
}

#[tokio::test]
async fn init_errors_are_http_errors() {
    let f = fixture(false).await;
    let s = &f.server;
    let unknown = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("hi"), "init": {"snapshotId": "nope"}}),
            None,
        )
        .await;
    assert_error(&unknown, 404, "NOT_FOUND", "nope");
    let state_to_server = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("hi"), "init": {"state": {}}}),
            None,
        )
        .await;
    assert_error(&state_to_server, 400, "FAILED_PRECONDITION", "state");
    let session_to_client = s
        .post(
            "/agents/clientBank",
            json!({"data": user("hi"), "init": {"sessionId": "s1"}}),
            None,
        )
        .await;
    assert_error(&session_to_client, 400, "FAILED_PRECONDITION", "sessionId");
    let no_agent = s.post("/agents/nobody", json!({"data": user("hi")}), None).await;
    assert_error(&no_agent, 404, "NOT_FOUND", "nobody");
}

#[tokio::test]
async fn get_snapshot_by_id_and_session() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/bankingAgent", json!({"data": user("hello")}), None)
        .await;
    let out = &body["result"];
    let (id, session) = (out["snapshotId"].clone(), out["sessionId"].clone());

    let (code, snap) = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": id}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{snap:#}");
    assert_eq!(snap["result"]["snapshotId"], id);
    assert_eq!(snap["result"]["status"], "completed");
    assert!(snap["result"]["state"]["messages"].as_array().unwrap().len() >= 2);

    let (code, latest) = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"sessionId": session, "metadataOnly": true}}),
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(latest["result"]["snapshotId"], id);
    assert!(latest["result"].get("state").is_none());

    let wrong_session = s
        .post(
            "/agents/bankingAgent/getSnapshot",
            json!({"data": {"snapshotId": id, "sessionId": "other"}}),
            None,
        )
        .await;
    assert_error(&wrong_session, 404, "NOT_FOUND", "not found");
    let neither = s
        .post("/agents/bankingAgent/getSnapshot", json!({"data": {}}), None)
        .await;
    assert_error(&neither, 400, "INVALID_ARGUMENT", "snapshotId or data.sessionId");
    let other_agent = s
        .post(
            "/agents/opsAgent/getSnapshot",
            json!({"data": {"snapshotId": id}}),
            None,
        )
        .await;
    assert_error(&other_agent, 404, "NOT_FOUND", "not found");
    let client_managed = s
        .post(
            "/agents/clientBank/getSnapshot",
            json!({"data": {"snapshotId": id}}),
            None,
        )
        .await;
    assert_error(&client_managed, 400, "FAILED_PRECONDITION", "no sessions");
}

#[tokio::test]
async fn abort_a_detached_run() {
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_secs(30)))
            .build()
            .unwrap(),
    )
    .await;
    let mut input = user("work");
    input["detach"] = json!(true);
    let (code, body) = server.post("/agents/slowAgent", json!({"data": input}), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "detached");
    let id = body["result"]["snapshotId"].as_str().unwrap().to_owned();

    let (code, body) = server
        .post("/agents/slowAgent/abort", json!({"data": {"snapshotId": id}}), None)
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["previousStatus"], "pending");
    assert_eq!(body["result"]["status"], "aborted");
    wait_for_status(store.as_ref(), &id, SnapshotStatus::Aborted).await;

    // Aborting a settled run is a no-op that reports its status.
    let (_, body) = server
        .post("/agents/slowAgent/abort", json!({"data": {"snapshotId": id}}), None)
        .await;
    assert_eq!(body["result"]["previousStatus"], "aborted");
    let unknown = server
        .post("/agents/slowAgent/abort", json!({"data": {"snapshotId": "nope"}}), None)
        .await;
    assert_error(&unknown, 404, "NOT_FOUND", "nope");
}

#[tokio::test]
async fn wait_for_snapshot_follows_a_detached_run() {
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(200)))
            .build()
            .unwrap(),
    )
    .await;
    let mut input = user("work");
    input["detach"] = json!(true);
    let (code, body) = server.post("/agents/slowAgent", json!({"data": input}), None).await;
    assert_eq!(code, 200, "{body:#}");
    let id = body["result"]["snapshotId"].as_str().unwrap().to_owned();

    // One request for the whole wait; it answers the settled row.
    let (code, body) = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": id, "timeoutMs": 20_000}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["status"], "completed", "{body:#}");
    assert_eq!(body["result"]["state"]["messages"][1]["content"][0]["text"], "finally");
    // A settled row answers at once, the same.
    let (_, again) = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": id}}),
            None,
        )
        .await;
    assert_eq!(again["result"]["status"], "completed");

    let unknown = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": "nope"}}),
            None,
        )
        .await;
    assert_error(&unknown, 404, "NOT_FOUND", "nope");
    let empty = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": ""}}),
            None,
        )
        .await;
    assert_error(&empty, 400, "INVALID_ARGUMENT", "snapshotId");
    let extra = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": id, "forever": true}}),
            None,
        )
        .await;
    assert_error(&extra, 400, "INVALID_ARGUMENT", "forever");
}

#[tokio::test]
async fn wait_for_snapshot_is_bounded() {
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_secs(60)))
            .build()
            .unwrap(),
    )
    .await;
    let mut input = user("work");
    input["detach"] = json!(true);
    let (_, body) = server.post("/agents/slowAgent", json!({"data": input}), None).await;
    let id = body["result"]["snapshotId"].as_str().unwrap().to_owned();
    // The run needs a minute; the wait gives up first and says where it
    // stands.
    let (code, body) = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": id, "timeoutMs": 20}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["status"], "pending");
    let (_, body) = server
        .post("/agents/slowAgent/abort", json!({"data": {"snapshotId": id}}), None)
        .await;
    assert_eq!(body["result"]["previousStatus"], "pending");
    let (_, body) = server
        .post(
            "/agents/slowAgent/waitForSnapshot",
            json!({"data": {"snapshotId": id, "timeoutMs": 20_000}}),
            None,
        )
        .await;
    assert_eq!(body["result"]["status"], "aborted", "{body:#}");
    assert_eq!(body["result"]["finishReason"], "aborted");
}

#[tokio::test]
async fn an_init_pairing_a_snapshot_with_another_session_is_invalid() {
    let store = memory();
    let s = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::ZERO))
            .build()
            .unwrap(),
    )
    .await;
    let (code, body) = s
        .post(
            "/agents/slowAgent",
            json!({"data": user("hello"), "init": {"sessionId": "mine"}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let id = body["result"]["snapshotId"].as_str().unwrap().to_owned();
    let before = dump(store.as_ref()).await;
    let got = s
        .post(
            "/agents/slowAgent",
            json!({"data": user("again"), "init": {"snapshotId": id, "sessionId": "theirs"}}),
            None,
        )
        .await;
    assert_error(&got, 400, "INVALID_ARGUMENT", "does not belong to session theirs");
    assert_eq!(dump(store.as_ref()).await, before, "a refused init changes nothing");
}

#[tokio::test]
async fn pending_and_audit_listings() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/opsAgent", json!({"data": user("close acct-9")}), None)
        .await;
    let out = body["result"].clone();
    assert_eq!(out["finishReason"], "interrupted", "{out:#}");

    let (code, list) = s.get("/agents/opsAgent/pending", None).await;
    assert_eq!(code, 200, "{list:#}");
    let items = list["result"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list:#}");
    let item = &items[0];
    assert_eq!(item["tool"], "closeAccount");
    assert_eq!(item["input"], json!({"account": "acct-9"}));
    assert_eq!(item["interrupt"]["message"], "Tool not in approved list: closeAccount");
    assert_eq!(item["interruptedBy"], "genkit-middleware/toolApproval");
    assert_eq!(item["sessionId"], out["sessionId"]);
    assert!(item["heldSince"].is_string());

    let part = item["part"].clone();
    let approve = restart(&part, json!({"toolApproved": true, "reason": "ticket 42"}));
    let (code, body) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [approve]}}, "init": {"snapshotId": item["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert!(
        body["result"]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("acct-9")
    );
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);

    let (_, list) = s.get("/agents/opsAgent/pending", None).await;
    assert_eq!(list["result"], json!([]));
    let session = out["sessionId"].as_str().unwrap();
    let (code, audit) = s
        .get(&format!("/agents/opsAgent/audit?sessionId={session}"), None)
        .await;
    assert_eq!(code, 200, "{audit:#}");
    let rows = audit["result"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{audit:#}");
    assert_eq!(rows[0]["decision"], "approve");
    assert_eq!(rows[0]["reason"], "ticket 42");
    assert_eq!(rows[0]["tool"], "closeAccount");

    let bad_query = s.get("/agents/opsAgent/pending?limit=many", None).await;
    assert_error(&bad_query, 400, "INVALID_ARGUMENT", "limit");
    let typo = s.get("/agents/opsAgent/audit?sesionId=x", None).await;
    assert_error(&typo, 400, "INVALID_ARGUMENT", "sesionId");
    let unknown_session = s.get("/agents/opsAgent/audit?sessionId=nope", None).await;
    assert_error(&unknown_session, 404, "NOT_FOUND", "nope");
}

#[tokio::test]
async fn deny_with_reason_reaches_the_model_and_the_tool_does_not_run() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/opsAgent", json!({"data": user("close acct-1")}), None)
        .await;
    let part = paused_part(&body["result"]);
    let deny = restart(&part, json!({"toolApproved": false, "reason": "not today"}));
    let (code, body) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [deny]}}, "init": {"snapshotId": body["result"]["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    let text = body["result"]["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("denied"), "{text}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    let (_, audit) = s.get("/agents/opsAgent/audit", None).await;
    assert_eq!(audit["result"][0]["decision"], "deny");
    assert_eq!(audit["result"][0]["reason"], "not today");
}

/// A restart whose `replacedInput` changes the transfer runs the new input;
/// the audit row says so: `inputHash` and `input` are what ran,
/// `originalInput` and `originalInputHash` what was held.
#[tokio::test]
async fn a_restart_with_replaced_input_audits_both_inputs_and_hashes() {
    use holdpoint::session::hash_json;
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
    let part = paused_part(&out);
    let held = part["toolRequest"]["input"].clone();
    assert_eq!(held, json!({"amount": 500.0, "toAccount": "savings"}));
    let ran = json!({"amount": 999999, "toAccount": "mallory"});
    let mut revised = restart(&part, json!({"approved": true}));
    revised["toolRequest"]["input"] = ran.clone();
    revised["metadata"]["replacedInput"] = held.clone();
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"restart": [revised]}}, "init": {"snapshotId": out["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");

    let session = out["sessionId"].as_str().unwrap();
    let (code, audit) = s
        .get(&format!("/agents/bankingAgent/audit?sessionId={session}"), None)
        .await;
    assert_eq!(code, 200, "{audit:#}");
    let rows = audit["result"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{audit:#}");
    let row = &rows[0];
    assert_eq!(row["decision"], "edit");
    assert_eq!(row["inputHash"], json!(hash_json(&ran)), "{row:#}");
    assert_eq!(row["input"], ran, "{row:#}");
    assert_eq!(row["originalInput"], held, "{row:#}");
    assert_eq!(row["originalInputHash"], json!(hash_json(&held)), "{row:#}");
}

/// A gate's hold restarted with a new input and `toolApproved: true` is
/// held again for the revised call: nothing ran, and the audit records no
/// `approve`.
#[tokio::test]
async fn a_gate_hold_restarted_with_new_input_is_held_again_and_not_audited_as_approved() {
    use holdpoint::session::hash_json;
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post("/agents/opsAgent", json!({"data": user("close acct-9")}), None)
        .await;
    let out = body["result"].clone();
    let part = paused_part(&out);
    let mut revised = restart(&part, json!({"toolApproved": true}));
    revised["toolRequest"]["input"] = json!({"account": "acct-1"});
    revised["metadata"]["replacedInput"] = json!({"account": "acct-9"});
    let (code, body) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [revised]}}, "init": {"snapshotId": out["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);

    let session = out["sessionId"].as_str().unwrap();
    let (_, audit) = s
        .get(&format!("/agents/opsAgent/audit?sessionId={session}"), None)
        .await;
    let rows = audit["result"].as_array().unwrap();
    let decisions: Vec<&Value> = rows.iter().map(|r| &r["decision"]).collect();
    assert_eq!(decisions, [&json!("edit")], "{audit:#}");
    assert_eq!(rows[0]["inputHash"], json!(hash_json(&json!({"account": "acct-1"}))));
    assert_eq!(rows[0]["originalInput"], json!({"account": "acct-9"}));
    assert_eq!(
        rows[0]["originalInputHash"],
        json!(hash_json(&json!({"account": "acct-9"})))
    );
}

#[tokio::test]
async fn agents_health_and_openapi() {
    let f = fixture(false).await;
    let s = &f.server;
    let (code, agents) = s.get("/agents", None).await;
    assert_eq!(code, 200);
    let names: Vec<&str> = agents["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bankingAgent", "clientBank", "opsAgent"]);
    assert_eq!(agents["result"][0]["stateManagement"], "server");
    assert_eq!(agents["result"][1]["stateManagement"], "client");
    assert_eq!(agents["result"][0]["abortable"], true);
    assert_eq!(agents["result"][1]["abortable"], false);

    let (code, health) = s.get("/healthz", None).await;
    assert_eq!(code, 200);
    assert_eq!(health["status"], "ok");

    let (code, doc) = s.get("/openapi.json", None).await;
    assert_eq!(code, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete", "patch"].contains(&k.as_str()))
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let served: BTreeSet<(String, String)> = holdpoint_server::routes::ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        documented, served,
        "the OpenAPI document must describe exactly the served routes"
    );
    // Every operation says what it answers, and every $ref resolves.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    for r in all {
        let pointer = r.trim_start_matches('#');
        assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
    }
    for (_, ops) in doc["paths"].as_object().unwrap() {
        for (_, op) in ops.as_object().unwrap() {
            assert!(op["responses"].is_object(), "{op:#}");
            assert!(op["summary"].is_string(), "{op:#}");
        }
    }
}

#[tokio::test]
async fn the_page_is_served_with_a_strict_policy() {
    let f = fixture(false).await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
        ("/web/api.js", "text/javascript"),
        ("/web/dom.js", "text/javascript"),
        ("/web/forms.js", "text/javascript"),
        ("/web/queue.js", "text/javascript"),
        ("/web/detail.js", "text/javascript"),
        ("/web/audit.js", "text/javascript"),
    ] {
        let r = f.server.client.get(f.server.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        let csp = r.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(!r.text().await.unwrap().is_empty(), "{path}");
    }
    // Only the page's own modules are served; nothing reaches the file system.
    for path in ["/web/nope.js", "/web/..%2Fsrc%2Flib.rs", "/web/app.css"] {
        let got = f.server.get(path, None).await;
        assert_error(&got, 404, "NOT_FOUND", "");
    }
}

#[tokio::test]
async fn turns_survive_a_caller_that_goes_away() {
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(slow(store.clone(), Duration::from_millis(400)))
            .build()
            .unwrap(),
    )
    .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let r = client
        .post(server.url("/agents/slowAgent"))
        .json(&json!({"data": user("hi"), "init": {"sessionId": "leaver"}}))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up before the turn ended");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let latest = store
        .get_latest_snapshot("leaver")
        .await
        .unwrap()
        .expect("the turn was persisted");
    assert_eq!(latest.status, SnapshotStatus::Completed);
    assert_eq!(latest.state.unwrap().messages.last().unwrap().text(), "finally");
    let _ = Arc::strong_count(&store);
}

#[tokio::test]
async fn a_javascript_client_that_rewrites_500_0_as_500_can_still_resume() {
    let f = fixture(false).await;
    let s = &f.server;
    let (_, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $500 to savings")}),
            None,
        )
        .await;
    let out = &body["result"];
    let mut part = paused_part(out);
    assert_eq!(part["toolRequest"]["input"]["amount"].to_string(), "500.0");
    // What JSON.parse + JSON.stringify make of it.
    part["toolRequest"]["input"]["amount"] = json!(500);
    let (code, body) = s
        .post(
            "/agents/bankingAgent",
            json!({"data": {"resume": {"restart": [restart(&part, json!({"approved": true}))]}}, "init": {"sessionId": out["sessionId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
}
