//! `genkit start -- banking serve` (genkit-cli from npm), driven through the
//! CLI's own API (the tools-server routes the Developer UI calls): the CLI
//! finds the runtime, lists the agent with its companions, tools and model,
//! runs a turn that pauses, resumes it streamed, and returns its trace with
//! the paused call; with `--experimental-reflection-v2` the same over the
//! CLI's WebSocket, with a multi-turn `sendBidiInput` conversation.
//! Needs node and genkit-cli (`.ci/run` installs it; HOLDPOINT_GENKIT_NODE_MODULES,
//! default /var/tmp/holdpoint-genkit/node_modules); skips (with a message)
//! when it is not installed, and fails instead under CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The CLI and everything it started, in one process group stopped on drop.
struct Group(std::process::Child);

impl Group {
    /// Sends `signal` to the whole group. The group id is the child's pid
    /// (`process_group(0)`), so never 0 or 1. The `--` is required:
    /// procps-ng 4.0's `kill -TERM -12345` reads only the first digit of
    /// the negative id and signals `-1` (every process the caller may
    /// signal) instead of the group.
    fn signal(&self, signal: &str) {
        let pgid = self.0.id();
        assert!(pgid > 1, "not a process group of our own: {pgid}");
        let _ = Command::new("kill")
            .args(["-s", signal, "--", &format!("-{pgid}")])
            .status();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal("TERM");
        // Bounded: the CLI exits on SIGTERM; if it does not, SIGKILL.
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.signal("KILL");
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn trpc_query(procedure: &str, input: &Value) -> String {
    let encoded: String = input
        .to_string()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("/api/{procedure}?input={encoded}")
}

/// The CLI's ports (its telemetry server from 4033, its v2 WebSocket server
/// from 3200) are picked free at start, so two CLIs starting at once may
/// pick the same: the tests start one at a time.
static ONE_CLI: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// genkit-cli's `genkit` script, or `None` (after saying so) when it is not
/// installed outside CI.
fn genkit_cli() -> Option<PathBuf> {
    let modules = PathBuf::from(
        std::env::var("HOLDPOINT_GENKIT_NODE_MODULES")
            .unwrap_or_else(|_| "/var/tmp/holdpoint-genkit/node_modules".into()),
    );
    let genkit = modules.join(".bin/genkit");
    if genkit.exists() {
        return Some(genkit);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: genkit-cli is missing from {} (.ci/run installs it)",
        modules.display()
    );
    eprintln!(
        "skipping: genkit-cli is not installed in {} (CI installs it; or set HOLDPOINT_GENKIT_NODE_MODULES)",
        modules.display()
    );
    None
}

/// A running `genkit start [extra] -- banking serve ...` and the base URL
/// of the CLI's own API.
struct Cli {
    _group: Group,
    _project: tempfile::TempDir,
    base: String,
    http: reqwest::Client,
}

fn start_cli(genkit: &PathBuf, extra: &[&str]) -> Cli {
    let project = tempfile::tempdir().unwrap();
    let (ui, app) = (free_port(), free_port());
    let mut cmd = Command::new(genkit);
    cmd.args(["start", "--non-interactive", "--port", &ui.to_string()])
        .args(extra)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_banking"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{app}"),
            "--model",
            "scripted",
            "--store",
            "memory:",
        ])
        .arg("--data-dir")
        .arg(project.path().join("data"))
        .current_dir(project.path())
        .env_remove("GENKIT_TELEMETRY_SERVER")
        .env_remove("GENKIT_ENV")
        .env_remove("GENKIT_REFLECTION_V2_SERVER")
        .env_remove("HOLDPOINT_MODEL")
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let group = Group(cmd.spawn().expect("genkit starts"));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Cli {
        _group: group,
        _project: project,
        base: format!("http://127.0.0.1:{ui}"),
        http,
    }
}

impl Cli {
    /// The runtime's actions through the CLI, once it found the runtime.
    /// The CLI starts slowly on a busy machine (node, its telemetry
    /// server, a failing UI download), so readiness waits up to three
    /// minutes; the panic shows what the CLI said last.
    async fn actions(&self) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        let mut last = String::from("(no answer from the CLI)");
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let response = match self
                .http
                .get(format!("{}{}", self.base, trpc_query("listActions", &json!({}))))
                .send()
                .await
            {
                Ok(response) => response,
                Err(e) => {
                    last = format!("request failed: {e}");
                    continue;
                }
            };
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if body["result"]["data"]["/agent/bankingAgent"].is_object() {
                return body["result"]["data"].clone();
            }
            last = body.to_string();
        }
        panic!("the CLI never listed bankingAgent; its last answer: {last}");
    }

    async fn post(&self, route: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("{}/api/{route}", self.base))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// A trace from the CLI's telemetry server.
    async fn trace(&self, trace_id: &str) -> Value {
        let trace: Value = self
            .http
            .get(format!(
                "{}{}",
                self.base,
                trpc_query("getTrace", &json!({"traceId": trace_id}))
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        trace["result"]["data"].clone()
    }
}

/// What every listing holds: the agent, its companions, its tools and its
/// model, with Genkit's metadata.
fn assert_lists_banking(actions: &Value) {
    let agent = &actions["/agent/bankingAgent"];
    assert_eq!(agent["metadata"]["agent"]["stateManagement"], "server", "{actions}");
    assert!(actions["/agent-snapshot/bankingAgent"].is_object(), "{actions}");
    assert!(actions["/agent-abort/bankingAgent"].is_object(), "{actions}");
    assert_eq!(actions["/tool/transferMoney"]["metadata"]["type"], "tool", "{actions}");
    assert!(actions["/tool/getBalance"]["inputSchema"].is_object(), "{actions}");
    let model = &actions["/model/scripted/banking-demo"];
    assert_eq!(
        model["metadata"]["model"]["label"], "scripted/banking-demo",
        "{actions}"
    );
}

fn user(text: &str) -> Value {
    json!({"message": {"role": "user", "content": [{"text": text}]}})
}

/// The paused call of `out` marked for a restart with approval.
fn approve(out: &Value) -> Value {
    let mut restart = out["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["interrupt"].is_object())
        .unwrap_or_else(|| panic!("no paused call in {out}"))
        .clone();
    restart["metadata"] = json!({"resumed": {"approved": true}});
    restart
}

/// The NDJSON lines of a streamed answer.
fn lines(body: &str) -> Vec<Value> {
    body.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genkit_start_lists_runs_pauses_resumes_and_traces_the_agent() {
    let Some(genkit) = genkit_cli() else { return };
    let _one = ONE_CLI.lock().await;
    let cli = start_cli(&genkit, &[]);
    let actions = cli.actions().await;
    assert_lists_banking(&actions);
    let http = &cli.http;
    let base = &cli.base;

    // A turn that pauses.
    let response = http
        .post(format!("{base}/api/runAction"))
        .json(&json!({
            "key": "/agent/bankingAgent",
            "input": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}},
        }))
        .send()
        .await
        .unwrap();
    let header = response
        .headers()
        .get("x-genkit-trace-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let paused: Value = response.json().await.unwrap();
    let out = &paused["result"];
    assert_eq!(out["finishReason"], "interrupted", "{paused}");
    let trace_id = paused["telemetry"]["traceId"].as_str().unwrap().to_owned();
    assert_eq!(header.as_deref(), Some(trace_id.as_str()));
    let restart = approve(out);

    // Its resume, streamed through the CLI: NDJSON chunks, then the result.
    let body = http
        .post(format!("{base}/api/streamAction"))
        .json(&json!({
            "key": "/agent/bankingAgent",
            "input": {"resume": {"restart": [restart]}},
            "init": {"snapshotId": out["snapshotId"]},
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = lines(&body);
    let done = &lines.last().unwrap()["result"];
    assert_eq!(done["finishReason"], "stop", "{body}");
    assert!(
        done["message"]["content"][0]["text"].as_str().unwrap().contains("txn-"),
        "{body}"
    );
    assert!(lines.iter().any(|l| l["turnEnd"].is_object()), "{body}");

    // The paused turn's trace, with the paused call where Genkit puts it.
    let trace = cli.trace(&trace_id).await;
    let spans = trace["spans"].as_object().expect("the trace's spans");
    let tool = spans
        .values()
        .find(|s| s["attributes"]["genkit:name"] == "transferMoney")
        .expect("a span for the paused call");
    assert!(tool["attributes"]["genkit:metadata:interrupt"].is_string(), "{trace}");
    assert!(
        spans.values().any(|s| s["attributes"]["genkit:isRoot"] == true),
        "{trace}"
    );

    // A tool runs on its own through the CLI, as a Genkit tool action.
    let balance: Value = cli
        .post(
            "runAction",
            &json!({"key": "/tool/getBalance", "input": {"account": "checking"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(balance["result"]["balance"], 1250, "{balance}");
}

/// Reflection API v2: `genkit start --experimental-reflection-v2` serves a
/// WebSocket the runtime connects to. Through the CLI: the listing, a
/// multi-turn bidirectional run fed by `sendBidiInput` (one turn answers,
/// the next pauses), its resume, and the paused run's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genkit_start_v2_runs_a_bidi_conversation_over_the_websocket() {
    let Some(genkit) = genkit_cli() else { return };
    let _one = ONE_CLI.lock().await;
    let cli = start_cli(&genkit, &["--experimental-reflection-v2"]);
    let actions = cli.actions().await;
    assert_lists_banking(&actions);

    // The CLI answers the stream's headers (with the trace id) once the
    // runtime reported the run started; the inputs follow by trace id.
    let response = cli
        .post("streamAction?bidi=true", &json!({"key": "/agent/bankingAgent"}))
        .await;
    let trace_id = response.headers()["x-genkit-trace-id"].to_str().unwrap().to_owned();
    for text in ["What is my balance?", "Transfer $500 to savings"] {
        let sent = cli
            .post("sendBidiInput", &json!({"traceId": trace_id, "chunk": user(text)}))
            .await;
        assert!(sent.status().is_success(), "{}", sent.text().await.unwrap());
    }
    let ended = cli.post("endBidiInput", &json!({"traceId": trace_id})).await;
    assert!(ended.status().is_success());
    let body = response.text().await.unwrap();
    let chunks = lines(&body);
    let turns: Vec<&Value> = chunks.iter().filter_map(|c| c.get("turnEnd")).collect();
    assert_eq!(turns.len(), 2, "{body}");
    assert_eq!(turns[0]["finishReason"], "stop", "{body}");
    assert_eq!(turns[1]["finishReason"], "interrupted", "{body}");
    let starts: Vec<&Value> = chunks.iter().filter_map(|c| c["turnStart"].get("turnIndex")).collect();
    assert_eq!(starts, [&json!(0), &json!(1)], "{body}");
    let out = &chunks.last().unwrap()["result"];
    assert_eq!(out["finishReason"], "interrupted", "{body}");
    assert_eq!(chunks.last().unwrap()["telemetry"]["traceId"], trace_id.as_str());

    // Its resume over v2, as one plain run.
    let done: Value = cli
        .post(
            "runAction",
            &json!({
                "key": "/agent/bankingAgent",
                "input": {"resume": {"restart": [approve(out)]}},
                "init": {"snapshotId": out["snapshotId"]},
            }),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(done["result"]["finishReason"], "stop", "{done}");
    assert!(
        done["result"]["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("txn-"),
        "{done}"
    );

    // The conversation's trace holds the paused call.
    let trace = cli.trace(&trace_id).await;
    let spans = trace["spans"].as_object().expect("the trace's spans");
    assert!(
        spans.values().any(|s| s["attributes"]["genkit:name"] == "transferMoney"
            && s["attributes"]["genkit:metadata:interrupt"].is_string()),
        "{trace}"
    );

    // An unknown action is the CLI's error, from the runtime's JSON-RPC error.
    let missing: Value = cli
        .post("runAction", &json!({"key": "/tool/nope", "input": {}}))
        .await
        .json()
        .await
        .unwrap();
    assert!(missing["error"].is_object(), "{missing}");
}
