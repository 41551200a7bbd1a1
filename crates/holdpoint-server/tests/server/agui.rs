//! `POST /agents/{name}/agui`: AG-UI runs, interrupts and resumes over
//! real HTTP, each rule of the AG-UI interrupt contract against the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::Agent;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::SessionStore;
use holdpoint::tool::tool;
use holdpoint::{ScriptedModel, ScriptedTurn, ToolContext};
use holdpoint_server::Server;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// Posts a `RunAgentInput` and reads the SSE events.
async fn agui(s: &TestServer, agent: &str, body: Value, key: Option<&str>) -> (StatusCode, Vec<Value>) {
    let mut req = s
        .client
        .post(s.url(&format!("/agents/{agent}/agui")))
        .header("accept", "text/event-stream")
        .json(&body);
    if let Some(key) = key {
        req = req.header("x-api-key", key);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    if status != StatusCode::OK {
        return (status, vec![serde_json::from_str(&text).unwrap()]);
    }
    let events = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    (status, events)
}

fn say(thread: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": format!("run-{text}"), "state": {}, "tools": [], "context": [],
        "messages": [{"id": "u1", "role": "user", "content": text}],
    })
}

fn answer(thread: &str, resume: Value) -> Value {
    json!({"threadId": thread, "runId": "run-resume", "messages": [], "resume": resume})
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The interrupts of a run's `RUN_FINISHED`.
#[track_caller]
fn interrupts(events: &[Value]) -> Vec<Value> {
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{events:#?}");
    assert_eq!(last["outcome"]["type"], "interrupt", "{events:#?}");
    last["outcome"]["interrupts"].as_array().unwrap().clone()
}

#[track_caller]
fn run_error(events: &[Value], code: &str) {
    assert_eq!(types(events), ["RUN_STARTED", "RUN_ERROR"], "{events:#?}");
    assert_eq!(events[1]["code"], code, "{events:#?}");
}

#[track_caller]
fn success(events: &[Value]) {
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{events:#?}");
    assert_eq!(last["outcome"]["type"], "success", "{events:#?}");
}

fn results(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT").collect()
}

/// Alice starts `thread` on opsAgent and gets one interrupt.
async fn held(f: &Fixture, thread: &str) -> Value {
    let (code, events) = agui(&f.server, "opsAgent", say(thread, "close checking"), Some(ALICE_KEY)).await;
    assert_eq!(code, 200);
    let mut all = interrupts(&events);
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[tokio::test]
async fn a_hold_ends_the_run_with_the_interrupt_outcome() {
    let f = fixture(true).await;
    let (code, events) = agui(&f.server, "opsAgent", say("t-1", "close checking"), Some(ALICE_KEY)).await;
    assert_eq!(code, 200);
    assert_eq!(events[0]["type"], "RUN_STARTED");
    assert_eq!(events[0]["threadId"], "t-1");
    let start = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START")
        .expect("the call is announced");
    assert_eq!(start["toolCallName"], "closeAccount");
    let args = events.iter().find(|e| e["type"] == "TOOL_CALL_ARGS").unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args["delta"].as_str().unwrap()).unwrap(),
        json!({"account": "checking"})
    );
    let i = &interrupts(&events)[0];
    assert_eq!(i["toolCallId"], start["toolCallId"]);
    assert_eq!(i["reason"], "tool_approval");
    assert!(i["id"].as_str().unwrap().contains('#'), "{i:#}");
    assert!(!i["message"].as_str().unwrap().is_empty());
    assert_eq!(i["responseSchema"]["properties"]["toolApproved"]["type"], "boolean");
    assert_eq!(i["metadata"]["holdpoint"]["tool"], "closeAccount");
    assert!(i.get("subagentRunId").is_none());
    // The thread is the session, held.
    let snapshot = i["metadata"]["holdpoint"]["snapshotId"].as_str().unwrap();
    let stored = f.store.get_snapshot(snapshot).await.unwrap().unwrap();
    assert_eq!(stored.session_id, "t-1");
    assert!(stored.is_waiting());
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn resolved_approves_and_the_result_lands_on_the_paused_call() {
    let f = fixture(true).await;
    let i = held(&f, "t-approve").await;
    let (code, events) = agui(
        &f.server,
        "opsAgent",
        answer("t-approve", json!([{"interruptId": i["id"], "status": "resolved"}])),
        Some(ALICE_KEY),
    )
    .await;
    assert_eq!(code, 200);
    success(&events);
    let got = results(&events);
    assert_eq!(got.len(), 1, "{events:#?}");
    assert_eq!(got[0]["toolCallId"], i["toolCallId"]);
    assert!(got[0]["content"].as_str().unwrap().contains("checking"), "{got:#?}");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(text.starts_with("ops result"), "{text}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn edited_args_restart_the_call_with_the_new_input() {
    let f = fixture(true).await;
    let i = held(&f, "t-edit").await;
    let resume =
        json!([{"interruptId": i["id"], "status": "resolved", "payload": {"editedArgs": {"account": "savings"}}}]);
    let (_, events) = agui(&f.server, "opsAgent", answer("t-edit", resume), Some(ALICE_KEY)).await;
    // ToolApproval's rule: a changed input is a new call to approve; the
    // revised call waits, under a new id, on the same tool call.
    let revised = interrupts(&events).remove(0);
    assert_eq!(revised["metadata"]["holdpoint"]["input"], json!({"account": "savings"}));
    assert_eq!(revised["toolCallId"], i["toolCallId"]);
    assert_ne!(revised["id"], i["id"]);
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    let resume = json!([{"interruptId": revised["id"], "status": "resolved", "payload": {"toolApproved": true}}]);
    let (_, events) = agui(&f.server, "opsAgent", answer("t-edit", resume), Some(ALICE_KEY)).await;
    success(&events);
    let got = results(&events);
    assert_eq!(
        got[0]["content"],
        json!({"closed": "savings"}).to_string(),
        "{events:#?}"
    );
    assert_eq!(got[0]["toolCallId"], i["toolCallId"]);
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancelled_denies_and_nothing_runs() {
    let f = fixture(true).await;
    let i = held(&f, "t-cancel").await;
    let resume = json!([{"interruptId": i["id"], "status": "cancelled", "metadata": {"reason": "not today"}}]);
    let (_, events) = agui(&f.server, "opsAgent", answer("t-cancel", resume), Some(ALICE_KEY)).await;
    success(&events);
    let got = results(&events);
    assert!(got[0]["content"].as_str().unwrap().contains("not today"), "{got:#?}");
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // The thread goes on.
    let (_, events) = agui(&f.server, "opsAgent", say("t-cancel", "hello"), Some(ALICE_KEY)).await;
    success(&events);
}

#[tokio::test]
async fn a_tools_own_question_is_answered_with_its_resume_data() {
    let f = fixture(true).await;
    let (_, events) = agui(
        &f.server,
        "bankingAgent",
        say("t-bank", "transfer $500 to savings"),
        Some(ALICE_KEY),
    )
    .await;
    let i = &interrupts(&events)[0];
    assert_eq!(i["message"], "Transfer $500.00 to savings");
    assert_eq!(i["responseSchema"]["properties"]["approved"]["type"], "boolean");
    assert_eq!(
        i["responseSchema"]["properties"]["editedArgs"]["properties"]["toAccount"]["type"], "string",
        "{i:#}"
    );
    // A payload the schema refuses changes nothing.
    let before = dump(f.store.as_ref()).await;
    let bad = json!([{"interruptId": i["id"], "status": "resolved", "payload": {"approved": "yes"}}]);
    let (_, events) = agui(&f.server, "bankingAgent", answer("t-bank", bad), Some(ALICE_KEY)).await;
    run_error(&events, "SCHEMA_MISMATCH");
    assert_eq!(dump(f.store.as_ref()).await, before);
    // Approve with edits: the new input, approved.
    let edit = json!([{"interruptId": i["id"], "status": "resolved",
        "payload": {"approved": true, "editedArgs": {"amount": 100.0, "toAccount": "savings"}}}]);
    let (_, events) = agui(&f.server, "bankingAgent", answer("t-bank", edit), Some(ALICE_KEY)).await;
    success(&events);
    assert!(
        results(&events)[0]["content"].as_str().unwrap().contains("txn-123"),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_replayed_resume_is_refused_and_runs_nothing_twice() {
    let f = fixture(true).await;
    let i = held(&f, "t-replay").await;
    let resume = answer("t-replay", json!([{"interruptId": i["id"], "status": "resolved"}]));
    let (_, events) = agui(&f.server, "opsAgent", resume.clone(), Some(ALICE_KEY)).await;
    success(&events);
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
    let before = dump(f.store.as_ref()).await;
    let (_, events) = agui(&f.server, "opsAgent", resume, Some(ALICE_KEY)).await;
    run_error(&events, "ALREADY_RESUMED");
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
    assert_eq!(dump(f.store.as_ref()).await, before);
    // Also after the thread paused again: the old id never answers the new hold.
    let again = held(&f, "t-replay").await;
    assert_ne!(again["id"], i["id"]);
    let before = dump(f.store.as_ref()).await;
    let stale = answer("t-replay", json!([{"interruptId": i["id"], "status": "resolved"}]));
    let (_, events) = agui(&f.server, "opsAgent", stale, Some(ALICE_KEY)).await;
    run_error(&events, "ALREADY_RESUMED");
    assert_eq!(dump(f.store.as_ref()).await, before);
    assert_eq!(f.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn open_interrupts_block_new_input() {
    let f = fixture(true).await;
    held(&f, "t-block").await;
    let before = dump(f.store.as_ref()).await;
    let (_, events) = agui(&f.server, "opsAgent", say("t-block", "close savings"), Some(ALICE_KEY)).await;
    run_error(&events, "INTERRUPTS_PENDING");
    assert_eq!(dump(f.store.as_ref()).await, before);
}

#[tokio::test]
async fn unknown_ids_and_bad_payloads_are_refused_and_change_nothing() {
    let f = fixture(true).await;
    let i = held(&f, "t-bad").await;
    let before = dump(f.store.as_ref()).await;
    for (resume, code) in [
        (
            json!([{"interruptId": "nope#0", "status": "resolved"}]),
            "UNKNOWN_INTERRUPT",
        ),
        (
            json!([{"interruptId": format!("{}x", i["id"].as_str().unwrap()), "status": "resolved"}]),
            "UNKNOWN_INTERRUPT",
        ),
        (
            json!([{"interruptId": i["id"], "status": "resolved"}, {"interruptId": i["id"], "status": "cancelled"}]),
            "DUPLICATE_INTERRUPT",
        ),
        (
            json!([{"interruptId": i["id"], "status": "resolved", "payload": {"toolApproved": "yes"}}]),
            "SCHEMA_MISMATCH",
        ),
        (
            json!([{"interruptId": i["id"], "status": "resolved", "payload": {"surprise": 1}}]),
            "SCHEMA_MISMATCH",
        ),
        (
            json!([{"interruptId": i["id"], "status": "resolved", "payload": {"editedArgs": {"account": 7}}}]),
            "SCHEMA_MISMATCH",
        ),
    ] {
        let (code_http, events) = agui(&f.server, "opsAgent", answer("t-bad", resume.clone()), Some(ALICE_KEY)).await;
        assert_eq!(code_http, 200, "{resume}");
        run_error(&events, code);
        assert_eq!(dump(f.store.as_ref()).await, before, "{resume}");
    }
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // A malformed status is not a RunAgentInput.
    let (code, _) = agui(
        &f.server,
        "opsAgent",
        answer("t-bad", json!([{"interruptId": i["id"], "status": "maybe"}])),
        Some(ALICE_KEY),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(dump(f.store.as_ref()).await, before);
}

/// An agent whose model asks for two held calls at once.
fn twice(store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>) -> Agent {
    let close = tool(
        "closeAccount",
        "Closes an account",
        move |_ctx: ToolContext, a: Account| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let model = ScriptedModel::from_fn("scripted/twice", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("both answered"));
        }
        let msg = holdpoint::Message::new(
            holdpoint::Role::Model,
            vec![
                holdpoint::Part::tool_request("closeAccount", None, Some(json!({"account": "a"}))),
                holdpoint::Part::tool_request("closeAccount", None, Some(json!({"account": "b"}))),
            ],
        );
        Some(ScriptedTurn::response(holdpoint::GenerateResponse::from_message(msg)).chunked(8))
    });
    Agent::builder("twiceAgent")
        .model(Arc::new(model))
        .tool(close)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_resume_must_answer_every_open_interrupt() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        with_auth(Server::builder().agent(twice(store.clone(), runs.clone())))
            .build()
            .unwrap(),
    )
    .await;
    let (_, events) = agui(&server, "twiceAgent", say("t-two", "close both"), Some(ALICE_KEY)).await;
    let all = interrupts(&events);
    assert_eq!(all.len(), 2);
    let starts: Vec<&Value> = events.iter().filter(|e| e["type"] == "TOOL_CALL_START").collect();
    assert_eq!(starts.len(), 2, "{events:#?}");
    for i in &all {
        assert!(starts.iter().any(|s| s["toolCallId"] == i["toolCallId"]), "{i:#}");
    }
    let before = dump(store.as_ref()).await;
    let partial = answer("t-two", json!([{"interruptId": all[0]["id"], "status": "resolved"}]));
    let (_, events) = agui(&server, "twiceAgent", partial, Some(ALICE_KEY)).await;
    run_error(&events, "PARTIAL_RESUME");
    assert_eq!(dump(store.as_ref()).await, before);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let both = answer(
        "t-two",
        json!([{"interruptId": all[0]["id"], "status": "resolved"}, {"interruptId": all[1]["id"], "status": "cancelled"}]),
    );
    let (_, events) = agui(&server, "twiceAgent", both, Some(ALICE_KEY)).await;
    success(&events);
    assert_eq!(results(&events).len(), 2, "{events:#?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_expired_interrupt_cannot_be_resolved_only_cancelled() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = ops_named("opsAgent", store.clone(), runs.clone(), Some(Duration::from_millis(1)));
    let server = TestServer::start(with_auth(Server::builder().agent(agent)).build().unwrap()).await;
    let (_, events) = agui(&server, "opsAgent", say("t-exp", "close checking"), Some(ALICE_KEY)).await;
    let i = interrupts(&events).remove(0);
    assert!(i["expiresAt"].is_string(), "{i:#}");
    // The hold outlives its expiry: wait until the store says so.
    for _ in 0..200 {
        let calls = holdpoint::agent::PendingApproval::of(
            &store
                .get_snapshot(i["metadata"]["holdpoint"]["snapshotId"].as_str().unwrap())
                .await
                .unwrap()
                .unwrap(),
        );
        if calls[0].expired {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = dump(store.as_ref()).await;
    let resolved = answer("t-exp", json!([{"interruptId": i["id"], "status": "resolved"}]));
    let (_, events) = agui(&server, "opsAgent", resolved, Some(ALICE_KEY)).await;
    run_error(&events, "INTERRUPT_EXPIRED");
    assert_eq!(dump(store.as_ref()).await, before);
    let cancelled = answer("t-exp", json!([{"interruptId": i["id"], "status": "cancelled"}]));
    let (_, events) = agui(&server, "opsAgent", cancelled, Some(ALICE_KEY)).await;
    success(&events);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn another_principal_cannot_resume_or_read_the_thread() {
    let f = fixture(true).await;
    let i = held(&f, "t-alice").await;
    let before = dump(f.store.as_ref()).await;
    let resume = answer("t-alice", json!([{"interruptId": i["id"], "status": "resolved"}]));
    let (code, body) = agui(&f.server, "opsAgent", resume.clone(), Some(BOB_KEY)).await;
    assert_eq!(code, 404, "{body:#?}");
    assert_eq!(body[0]["error"]["status"], "NOT_FOUND");
    let (code, body) = agui(&f.server, "opsAgent", say("t-alice", "close savings"), Some(BOB_KEY)).await;
    assert!(
        code.is_client_error() || body.last().unwrap()["type"] == "RUN_ERROR",
        "{code} {body:#?}"
    );
    assert_eq!(dump(f.store.as_ref()).await, before);
    // Without credentials: 401, as the rest of the API.
    let (code, _) = agui(&f.server, "opsAgent", resume.clone(), None).await;
    assert_eq!(code, 401);
    // A key scoped to other agents: 403.
    let (code, _) = agui(&f.server, "bankingAgent", say("t-ops", "hi"), Some(OPS_KEY)).await;
    assert_eq!(code, 403);
    assert_eq!(dump(f.store.as_ref()).await, before);
    assert_eq!(f.runs.load(Ordering::SeqCst), 0);
    // Alice still can.
    let (_, events) = agui(&f.server, "opsAgent", resume, Some(ALICE_KEY)).await;
    success(&events);
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The official `@ag-ui/client` (`HttpAgent`, driven by
/// `tests/agui/client.mjs`) against the endpoint. Skipped (with a message)
/// when node or the package is missing, unless `CI=true`: `.ci/run`
/// installs it (`npm ci --prefix crates/holdpoint-server/tests/agui`).
#[tokio::test]
async fn the_official_ag_ui_client_runs_interrupts_and_resumes() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/agui");
    let installed = dir.join("node_modules/@ag-ui/client/package.json").is_file();
    let Some(node) = which("node").filter(|_| installed) else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "node and @ag-ui/client are required in CI (npm ci --prefix crates/holdpoint-server/tests/agui)"
        );
        eprintln!("SKIPPED: install node and the client: npm ci --prefix crates/holdpoint-server/tests/agui");
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        with_auth(
            Server::builder()
                .agent(ops(store.clone(), runs.clone()))
                .agent(ops_named(
                    "opsTtl",
                    store.clone(),
                    runs.clone(),
                    Some(Duration::from_millis(1)),
                )),
        )
        .build()
        .unwrap(),
    )
    .await;
    let output = tokio::process::Command::new(node)
        .arg("client.mjs")
        .arg(&server.base)
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
    let code = |step: &str| out[step]["error"]["code"].clone();
    // Run → interrupt.
    assert_eq!(out["first"]["outcome"], "interrupt", "{out:#}");
    assert_eq!(out["pendingAfterFirst"], 1);
    assert_eq!(out["first"]["interrupts"][0]["reason"], "tool_approval");
    // New input while interrupted: the client refuses, and so does the server.
    assert!(
        out["clientBlocked"]["thrown"]
            .as_str()
            .unwrap()
            .contains("pending interrupt"),
        "{out:#}"
    );
    assert_eq!(code("serverBlocked"), "INTERRUPTS_PENDING", "{out:#}");
    // Approve: the result lands on the paused call.
    assert_eq!(out["approved"]["outcome"], "success", "{out:#}");
    assert_eq!(out["approved"]["results"][0]["toolCallId"], out["approvedToolCallId"]);
    assert!(out["approved"]["text"].as_str().unwrap().contains("checking"));
    // A second resume: refused.
    assert_eq!(code("replayed"), "ALREADY_RESUMED", "{out:#}");
    // Edit, then approve the revised call.
    assert_eq!(out["edited"]["outcome"], "interrupt", "{out:#}");
    assert_eq!(
        out["edited"]["interrupts"][0]["metadata"]["holdpoint"]["input"],
        json!({"account": "savings"})
    );
    assert_eq!(out["editApproved"]["outcome"], "success", "{out:#}");
    assert!(out["editApproved"]["text"].as_str().unwrap().contains("savings"));
    // Cancel: denied with the reason.
    assert_eq!(out["cancelled"]["outcome"], "success", "{out:#}");
    assert!(
        out["cancelled"]["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("not today")
    );
    // Schema mismatch, then the same interrupt still answers.
    assert_eq!(code("mismatch"), "SCHEMA_MISMATCH", "{out:#}");
    assert_eq!(out["afterMismatch"]["outcome"], "success", "{out:#}");
    // Expiry.
    assert!(out["expiresAt"].is_string());
    assert!(
        out["expiredClient"]["thrown"].as_str().unwrap().contains("expired"),
        "{out:#}"
    );
    assert_eq!(code("expiredServer"), "INTERRUPT_EXPIRED", "{out:#}");
    assert_eq!(out["expiredCancelled"]["outcome"], "success", "{out:#}");
    // Exactly two closings ran: the approved one and the edited one.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// closeAccount under an approval rule only `finance` answers, not the
/// session's owner.
fn ruled(store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>) -> Agent {
    ruled_with_quorum(store, runs, 1)
}

/// [`ruled`] with the rule's quorum.
fn ruled_with_quorum(store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>, quorum: u32) -> Agent {
    let close = tool(
        "closeAccount",
        "Closes an account",
        move |_ctx: ToolContext, a: Account| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let model = ScriptedModel::from_fn("scripted/ruled", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        Some(ScriptedTurn::tool_call("closeAccount", json!({"account": "checking"})))
    });
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        name: Some("closings".into()),
        tool: Some("closeAccount".into()),
        approvers: vec!["finance".into()],
        self_approval: false,
        quorum,
        ..Default::default()
    }])
    .unwrap();
    Agent::builder("ruledAgent")
        .model(Arc::new(model))
        .tool(close)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_resume_goes_through_the_approval_rules() {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        with_auth(Server::builder().agent(ruled(store.clone(), runs.clone())))
            .build()
            .unwrap(),
    )
    .await;
    let (_, events) = agui(&server, "ruledAgent", say("t-rule", "close it"), Some(ALICE_KEY)).await;
    let i = interrupts(&events).remove(0);
    assert_eq!(i["metadata"]["holdpoint"]["rule"]["rule"], "closings", "{i:#}");
    let before = dump(store.as_ref()).await;
    let resume = answer("t-rule", json!([{"interruptId": i["id"], "status": "resolved"}]));
    let (_, events) = agui(&server, "ruledAgent", resume, Some(ALICE_KEY)).await;
    run_error(&events, "PERMISSION_DENIED");
    assert!(
        events[1]["message"].as_str().unwrap().contains("closings"),
        "{events:#?}"
    );
    assert_eq!(dump(store.as_ref()).await, before);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Under a rule that needs two approvers, an AG-UI approval is one of
/// them: recorded (the run ends with the same interrupt, naming who
/// approved), counted once per approver, and the second approver's resume
/// runs the call, once.
#[tokio::test]
async fn approvals_under_a_quorum_rule_are_recorded_until_it_is_met() {
    const FIONA: &str = "k-fiona-agui-0123456789abcdef";
    const FRANK: &str = "k-frank-agui-0123456789abcdef";
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(ruled_with_quorum(store.clone(), runs.clone(), 2))
            .api_keys(
                holdpoint_server::auth::ApiKeys::new()
                    .key(ALICE_KEY, "alice")
                    .key_with_roles(FIONA, "fiona", ["finance"])
                    .key_with_roles(FRANK, "frank", ["finance"]),
            )
            .build()
            .unwrap(),
    )
    .await;
    let (code, events) = agui(&server, "ruledAgent", say("t-quorum", "close it"), Some(ALICE_KEY)).await;
    assert_eq!(code, StatusCode::OK, "{events:#?}");
    let i = interrupts(&events).remove(0);
    assert_eq!(i["metadata"]["holdpoint"]["rule"]["quorum"], 2, "{i:#}");
    let approve = answer("t-quorum", json!([{"interruptId": i["id"], "status": "resolved"}]));

    for _ in 0..2 {
        // fiona's approval is recorded; her second counts once.
        let (_, events) = agui(&server, "ruledAgent", approve.clone(), Some(FIONA)).await;
        let still = interrupts(&events);
        assert_eq!(still.len(), 1, "{events:#?}");
        assert_eq!(still[0]["id"], i["id"], "the same interrupt stays open");
        let approvals = &still[0]["metadata"]["holdpoint"]["approvals"];
        assert_eq!(approvals.as_array().map(Vec::len), Some(1), "{approvals:#}");
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }

    // frank's meets the quorum: the call runs once and the run succeeds.
    let (_, events) = agui(&server, "ruledAgent", approve.clone(), Some(FRANK)).await;
    success(&events);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A late approval finds nothing: the thread no longer waits on a hold
    // of hers, so an approver does not see it.
    let (code, _) = agui(&server, "ruledAgent", approve, Some(FIONA)).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
