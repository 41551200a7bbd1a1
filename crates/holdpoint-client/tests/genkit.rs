//! The client against Genkit JS 1.42's own agent server (`expressHandler`
//! of `@genkit-ai/express`, tests/genkit/server.mjs): the same pause →
//! typed claim → resume flow as against holdpoint-server. Needs node and
//! the npm packages `.ci/run` installs (HOLDPOINT_GENKIT_NODE_MODULES,
//! default /var/tmp/holdpoint-genkit/node_modules); skips without CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::session::SnapshotStatus;
use holdpoint::{FinishReason, ResumableTool, Resume, Status, ToolContext};
use holdpoint_client::{Client, ClientError, Layout};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Transfer {
    amount: f64,
    to_account: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Approval {
    approved: bool,
}

/// The tool's typed claim only: the call runs in the JS server.
fn claim() -> ResumableTool<Transfer, String, Approval> {
    ResumableTool::define(
        "transferMoney",
        "Transfers money; needs approval",
        |ctx: ToolContext, _: Transfer, _: Option<Approval>| async move { Err(ctx.fail("runs remotely")) },
    )
    .unwrap()
}

struct JsServer {
    base: String,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

async fn genkit_server() -> Option<JsServer> {
    let modules = PathBuf::from(
        std::env::var("HOLDPOINT_GENKIT_NODE_MODULES")
            .unwrap_or_else(|_| "/var/tmp/holdpoint-genkit/node_modules".into()),
    );
    if !modules.join("genkit").is_dir() || !modules.join("@genkit-ai/express").is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI: the npm packages genkit and @genkit-ai/express are missing from {} (.ci/run installs them)",
            modules.display()
        );
        eprintln!(
            "skipping: genkit and @genkit-ai/express are not installed in {} (CI installs them)",
            modules.display()
        );
        return None;
    }
    // ES modules resolve packages next to the script, not through NODE_PATH.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("server.mjs");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/genkit/server.mjs"), &script).unwrap();
    std::os::unix::fs::symlink(&modules, dir.path().join("node_modules")).unwrap();
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .arg("0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(port) = line.strip_prefix("listening ") {
                return port.trim().to_owned();
            }
        }
        panic!("the Genkit server exited before listening");
    })
    .await
    .expect("the Genkit server listens within 60 s");
    Some(JsServer {
        base: format!("http://127.0.0.1:{port}"),
        _child: child,
        _dir: dir,
    })
}

#[tokio::test]
async fn pause_claim_and_resume_against_genkit_js() {
    let Some(js) = genkit_server().await else { return };
    let tool = claim();
    let client = Client::new(&js.base).layout(Layout::Genkit { prefix: String::new() });
    let agent = client.agent("bankingAgent");

    let paused = agent.run_text("Transfer $500 to savings").await.unwrap();
    assert_eq!(paused.finish_reason, FinishReason::Interrupted);
    let call = tool
        .interrupted(&paused.interrupts()[0])
        .expect("a transferMoney pause");
    assert_eq!(call.input.amount, 500.0);
    let approve = call.restart(Some(Approval { approved: true })).unwrap();

    // Resume by session id, streamed: chunks, then the output.
    let mut stream = agent
        .stream(
            AgentInput::resume(Resume::from_parts([approve.clone()])),
            AgentInit::session(paused.session_id.clone()),
        )
        .await
        .unwrap();
    let mut ended = false;
    while let Some(chunk) = stream.next_chunk().await {
        ended |= chunk.unwrap().turn_end.is_some();
    }
    assert!(ended, "no turnEnd chunk");
    let done = stream.output().await.unwrap();
    assert_eq!(done.text(), "Done: txn-123");

    // Snapshots by id and by session, the wait (polled), and an abort of a
    // settled snapshot that keeps its status.
    let id = done.snapshot_id.clone().expect("a snapshot id");
    let by_id = agent.snapshot(&id).await.unwrap();
    assert_eq!(by_id.session_id, paused.session_id);
    let latest = agent.latest_snapshot(&paused.session_id).await.unwrap();
    assert_eq!(latest.snapshot_id, id);
    let settled = agent.wait_for_snapshot(&id, Some(2_000)).await.unwrap();
    assert_eq!(settled.status, SnapshotStatus::Completed);
    let aborted = agent.abort(&id).await.unwrap();
    assert_eq!(aborted.status, Some(SnapshotStatus::Completed));
}

#[tokio::test]
async fn genkit_errors_are_typed() {
    let Some(js) = genkit_server().await else { return };
    let agent = Client::new(&js.base)
        .layout(Layout::Genkit { prefix: String::new() })
        .agent("bankingAgent");
    // A plain error body (Genkit's `getCallableJSON`, `{status, message}`):
    // Genkit JS 1.42 answers an unknown snapshot with a 500 INTERNAL.
    let err = agent.snapshot("no-such-snapshot").await.unwrap_err();
    match &err {
        ClientError::Server { http, status, message } => {
            assert_eq!((*http, *status), (500, Status::Internal), "{err}");
            assert_eq!(message, "Internal Error", "the body's own message: {err}");
        }
        other => panic!("not a server error: {other}"),
    }
    // A streamed turn's error frame comes on an `error:` line: client state
    // sent to a server-managed agent is refused before the turn.
    let stream = agent
        .stream(
            AgentInput::text("hi"),
            AgentInit::state(serde_json::json!({"messages": []})),
        )
        .await
        .unwrap();
    let err = stream.output().await.unwrap_err();
    assert!(matches!(err, ClientError::Server { .. }), "{err}");
}
