//! `A2aAgentTool` against a remote agent that is not Holdpoint: a small
//! server built with the official Python SDK (`a2a-sdk`, its Starlette
//! JSON-RPC routes under uvicorn; `tests/sdk-server/server.py`), which
//! stops its task at `TASK_STATE_INPUT_REQUIRED` asking "confirm the wire
//! to acct-4471? yes/no" and completes it on the answer. The root agent
//! keeps its sessions in a SQLite file and is dropped and rebuilt between
//! the hold and the answer. The server lists the answers it received
//! (`GET /answers`), so each test checks what reached it, and how often.
//!
//! Skipped (with a message) when the SDK's server is missing, unless
//! `CI=true`: `.ci/run` installs it from `tests/sdk-server/requirements.txt`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, Answered, Caller};
use holdpoint::message::{PartKind, Role};
use holdpoint::model::FinishReason;
use holdpoint::{Part, Resume, ScriptedModel, ScriptedTurn};
use holdpoint_a2a::A2aAgentTool;
use holdpoint_store_sqlite::SqliteStore;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const INSTALL: &str = "python3 -m venv /var/tmp/holdpoint-a2a-server-py && /var/tmp/holdpoint-a2a-server-py/bin/pip install -r crates/holdpoint-a2a/tests/sdk-server/requirements.txt";

/// The interpreter of the venv `.ci/run` installs the SDK's server into
/// (`HOLDPOINT_A2A_SERVER_PYTHON` overrides it), when it has the SDK's
/// server routes and uvicorn.
fn sdk_python() -> Option<PathBuf> {
    let python = std::env::var_os("HOLDPOINT_A2A_SERVER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/tmp/holdpoint-a2a-server-py/bin/python".into());
    let ok = python.is_file()
        && std::process::Command::new(&python)
            .args(["-c", "import a2a.server.routes, starlette, sse_starlette, uvicorn"])
            .current_dir(std::env::temp_dir())
            .output()
            .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

/// The SDK-built wire desk, running until dropped.
struct WireDesk {
    /// Its JSON-RPC endpoint (its card's JSONRPC interface).
    url: String,
    base: String,
    _process: tokio::process::Child,
}

impl WireDesk {
    /// Starts `tests/sdk-server/server.py`; `None` (the test skips) when
    /// the SDK's server is not installed and this is not CI.
    async fn start() -> Option<WireDesk> {
        let Some(python) = sdk_python() else {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "the A2A SDK's server is required in CI ({INSTALL})"
            );
            eprintln!("SKIPPED: install the A2A SDK's server: {INSTALL}");
            return None;
        };
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk-server/server.py");
        let mut process = tokio::process::Command::new(python)
            .arg(script)
            .arg("0")
            .current_dir(std::env::temp_dir())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let banner = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the SDK server started within 60 s")
            .unwrap()
            .expect("the SDK server printed its address");
        let base = banner
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("not a banner: {banner}"))
            .to_owned();
        // The card the SDK serves names the endpoint the tool is given.
        let card: Value = reqwest::get(format!("{base}/.well-known/agent-card.json"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC", "{card:#}");
        let url = card["supportedInterfaces"][0]["url"].as_str().unwrap().to_owned();
        Some(WireDesk {
            url,
            base,
            _process: process,
        })
    }

    /// The answers the server received, in order.
    async fn answers(&self) -> Vec<Value> {
        let got: Value = reqwest::get(format!("{}/answers", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        got.as_array().unwrap().clone()
    }

    /// `GetTask` as the SDK answers it.
    async fn task(&self, id: &str) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
        let r: Value = reqwest::Client::new()
            .post(&self.url)
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(r.get("error").is_none(), "{r:#}");
        r["result"].clone()
    }

    /// Answers a task directly (as a process that crashed right after
    /// sending would have).
    async fn send_answer(&self, task_id: &str, context_id: &str, data: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "m-direct", "role": "ROLE_USER", "taskId": task_id, "contextId": context_id,
            "parts": [{"data": data}],
        }}});
        reqwest::Client::new()
            .post(&self.url)
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// A scripted root: the user's text goes to the `wire` tool; the tool's
/// output comes back as `result: {output}`.
fn model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted/root".to_owned(), move |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let said = last
                .content
                .iter()
                .filter_map(|p| match &p.kind {
                    PartKind::ToolResponse(r) => Some(r.output.clone().unwrap_or(Value::Null).to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            return Some(ScriptedTurn::text(format!("result: {said}")));
        }
        Some(ScriptedTurn::tool_call("wire", json!({"input": last.text()})))
    })
}

/// The root agent (a new one per "process"), its sessions in the SQLite
/// file at `path`, its `wire` tool the SDK's agent.
async fn root(path: &Path, desk: &WireDesk) -> Agent {
    let store = SqliteStore::open(path).await.unwrap();
    let wire = A2aAgentTool::new("wire", "The wire desk's agent", &desk.url).unwrap();
    Agent::builder("root")
        .model(Arc::new(model()))
        .tool(wire)
        .store(Arc::new(store))
        .build()
        .unwrap()
}

/// The held call: its snapshot, its interrupt part, the remote task's id
/// and context id.
struct Held {
    snapshot: String,
    part: Part,
    task_id: String,
    context_id: String,
}

/// Runs a root on `path` to the remote's question, and drops it.
async fn held(path: &Path, desk: &WireDesk) -> Held {
    let agent = root(path, desk).await;
    let out = agent.run_text("wire $200 to acct-4471").await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Interrupted, "{out:?}");
    let parts = out.interrupts();
    assert_eq!(parts.len(), 1, "{out:?}");
    let data = parts[0].interrupt_data().unwrap();
    assert_eq!(data["kind"], "a2a.inputRequired", "{data:#?}");
    assert_eq!(data["message"], "confirm the wire to acct-4471? yes/no", "{data:#?}");
    assert_eq!(data["agentUrl"], json!(desk.url));
    assert_eq!(data["question"]["data"][0]["account"], "acct-4471", "{data:#?}");
    assert_eq!(
        data["question"]["data"][0]["request"], "wire $200 to acct-4471",
        "{data:#?}"
    );
    let task_id = data["taskId"].as_str().unwrap().to_owned();
    let context_id = data["contextId"].as_str().unwrap().to_owned();
    let task = desk.task(&task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task:#}");
    assert_eq!(task["contextId"], json!(context_id));
    Held {
        snapshot: out.snapshot_id.clone().unwrap(),
        part: parts[0].clone(),
        task_id,
        context_id,
    }
}

/// The hold is answered by a new agent on the same SQLite file; the answer
/// reaches the SDK's task once, on its `taskId`; the turn ends with the
/// remote result; the replayed answer sends nothing.
#[tokio::test]
async fn the_sdk_agents_question_is_a_hold_answered_once_across_a_restart() {
    let Some(desk) = WireDesk::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");
    let h = held(&path, &desk).await;
    assert!(desk.answers().await.is_empty(), "nothing answered yet");

    // A new process: a new agent on the same file.
    let agent = root(&path, &desk).await;
    let resume = Resume::from_parts([h.part.restart(Some(json!({"approved": true}))).unwrap()]);
    let out = agent
        .run(
            AgentInput::resume(resume.clone()),
            AgentInit::snapshot(h.snapshot.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(
        out.text().contains("wired to acct-4471 (the answer was yes)"),
        "{}",
        out.text()
    );
    assert!(
        out.text().contains(&h.task_id),
        "the output names the task: {}",
        out.text()
    );
    let answers = desk.answers().await;
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert_eq!(answers[0]["taskId"], json!(h.task_id));
    assert_eq!(answers[0]["contextId"], json!(h.context_id));
    assert_eq!(answers[0]["data"], json!([{"approved": true}]));
    assert_eq!(answers[0]["wired"], true);
    let task = desk.task(&h.task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert_eq!(task["artifacts"][0]["name"], "result", "{task:#}");

    // The same answer again, from yet another process: refused by the
    // root's store, nothing reaches the remote.
    let agent = root(&path, &desk).await;
    let again = agent
        .run(AgentInput::resume(resume), AgentInit::snapshot(h.snapshot))
        .await;
    assert!(again.is_err() || again.unwrap().is_failed());
    assert_eq!(desk.answers().await.len(), 1, "the replay sent nothing");
}

/// A text answer is a text part on the task; an approver's denial
/// (`Decisions::answer`, as the inbox and `holdpoint approve` send it) cancels
/// the SDK's task and reaches nothing else.
#[tokio::test]
async fn a_text_answer_and_an_approvers_denial_reach_the_sdk_task() {
    let Some(desk) = WireDesk::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");

    let h = held(&path, &desk).await;
    let agent = root(&path, &desk).await;
    let resume = Resume::from_parts([h.part.restart(Some(json!({"text": "no"}))).unwrap()]);
    let out = agent
        .run(AgentInput::resume(resume), AgentInit::snapshot(h.snapshot))
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(out.text().contains("not wired to acct-4471"), "{}", out.text());
    let answers = desk.answers().await;
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert_eq!(answers[0]["taskId"], json!(h.task_id));
    assert_eq!(answers[0]["text"], json!(["no"]));
    assert_eq!(answers[0]["wired"], false);

    let h = held(&path, &desk).await;
    let agent = root(&path, &desk).await;
    let answered = agent
        .decisions()
        .answer(Answer::deny(h.snapshot, Some("wrong account")), Caller::anonymous())
        .await
        .unwrap();
    let Answered::Resumed(out) = answered else {
        panic!("not resumed: {answered:?}")
    };
    assert!(out.text().contains("wrong account"), "{}", out.text());
    assert!(out.text().contains("canceled"), "{}", out.text());
    let task = desk.task(&h.task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task:#}");
    assert_eq!(desk.answers().await.len(), 1, "the denial sent no answer");
}

/// The answer reached the SDK's task but the root never recorded it (the
/// process died right after sending): the restart's answer is refused by
/// the SDK (`-32004`, the task is terminal), and the tool reads the task
/// and ends the call with its result instead of failing — the remote
/// acted once.
#[tokio::test]
async fn an_answer_that_arrived_before_a_crash_is_not_acted_on_twice() {
    let Some(desk) = WireDesk::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("root.db");
    let h = held(&path, &desk).await;

    let sent = desk
        .send_answer(&h.task_id, &h.context_id, json!({"approved": true}))
        .await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent:#}"
    );
    let again = desk
        .send_answer(&h.task_id, &h.context_id, json!({"approved": true}))
        .await;
    assert_eq!(
        again["error"]["code"], -32004,
        "the SDK refuses a second answer: {again:#}"
    );

    let agent = root(&path, &desk).await;
    let resume = Resume::from_parts([h.part.restart(Some(json!({"approved": true}))).unwrap()]);
    let out = agent
        .run(AgentInput::resume(resume), AgentInit::snapshot(h.snapshot))
        .await
        .unwrap();
    assert_eq!(out.finish_reason, FinishReason::Stop, "{out:?}");
    assert!(
        out.text().contains("wired to acct-4471 (the answer was yes)"),
        "{}",
        out.text()
    );
    assert_eq!(desk.answers().await.len(), 1, "the wire went once");
}
