//! `genkit start -- banking serve` (genkit-cli from npm), driven through the
//! CLI's own API (the tools-server routes the Developer UI calls): the CLI
//! finds the runtime, lists the agent and its companions, runs a turn that
//! pauses, resumes it streamed, and returns its trace with the paused call.
//! Needs node and genkit-cli (`.ci/run` installs it; HOLDPOINT_GENKIT_NODE_MODULES,
//! default /var/tmp/holdpoint-genkit/node_modules); skips without CI.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genkit_start_lists_runs_pauses_resumes_and_traces_the_agent() {
    let modules = PathBuf::from(
        std::env::var("HOLDPOINT_GENKIT_NODE_MODULES")
            .unwrap_or_else(|_| "/var/tmp/holdpoint-genkit/node_modules".into()),
    );
    let genkit = modules.join(".bin/genkit");
    if !genkit.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI: genkit-cli is missing from {} (.ci/run installs it)",
            modules.display()
        );
        eprintln!(
            "skipping: genkit-cli is not installed in {} (CI installs it)",
            modules.display()
        );
        return;
    }
    let project = tempfile::tempdir().unwrap();
    let (ui, app) = (free_port(), free_port());
    let mut cmd = Command::new(&genkit);
    cmd.args(["start", "--non-interactive", "--port", &ui.to_string(), "--"])
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
        .env_remove("HOLDPOINT_MODEL")
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let _group = Group(cmd.spawn().expect("genkit starts"));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{ui}");

    // The CLI lists the runtime's actions once it found the runtime file.
    let mut actions = Value::Null;
    for _ in 0..240 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(response) = http
            .get(format!("{base}{}", trpc_query("listActions", &json!({}))))
            .send()
            .await
        else {
            continue;
        };
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if body["result"]["data"]["/agent/bankingAgent"].is_object() {
            actions = body["result"]["data"].clone();
            break;
        }
    }
    eprintln!("listed: {}", actions.as_object().map_or(0, |a| a.len()));
    let agent = &actions["/agent/bankingAgent"];
    assert_eq!(agent["metadata"]["agent"]["stateManagement"], "server", "{actions}");
    assert!(actions["/agent-snapshot/bankingAgent"].is_object(), "{actions}");
    assert!(actions["/agent-abort/bankingAgent"].is_object(), "{actions}");

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
    let mut restart = out["message"]["content"][0].clone();
    assert!(restart["metadata"]["interrupt"].is_object(), "{paused}");

    eprintln!("paused: {trace_id}");
    // Its resume, streamed through the CLI: NDJSON chunks, then the result.
    restart["metadata"] = json!({"resumed": {"approved": true}});
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
    let lines: Vec<Value> = body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let done = &lines.last().unwrap()["result"];
    assert_eq!(done["finishReason"], "stop", "{body}");
    assert!(
        done["message"]["content"][0]["text"].as_str().unwrap().contains("txn-"),
        "{body}"
    );
    assert!(lines.iter().any(|l| l["turnEnd"].is_object()), "{body}");

    // The paused turn's trace, with the paused call where Genkit puts it.
    let trace: Value = http
        .get(format!(
            "{base}{}",
            trpc_query("getTrace", &json!({"traceId": trace_id}))
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let spans = trace["result"]["data"]["spans"].as_object().expect("the trace's spans");
    let tool = spans
        .values()
        .find(|s| s["attributes"]["genkit:name"] == "transferMoney")
        .expect("a span for the paused call");
    assert!(tool["attributes"]["genkit:metadata:interrupt"].is_string(), "{trace}");
    assert!(
        spans.values().any(|s| s["attributes"]["genkit:isRoot"] == true),
        "{trace}"
    );
}
