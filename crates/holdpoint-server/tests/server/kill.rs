//! SIGKILL of a server process with a SQLite store, mid-turn and
//! mid-resume: afterwards the file opens, every snapshot reads, the claimed
//! call is in doubt (claimed, `resumedAt` set, nothing after it), and the
//! next start never runs it again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use holdpoint::agent::Agent;
use holdpoint::message::Role;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::SnapshotQuery;
use holdpoint::tool::tool;
use holdpoint::{ScriptedModel, ScriptedTurn, ToolContext};
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::child::ChildServer;
use crate::support::*;

/// Where the hanging tool notes each start: next to the database file.
fn marker(url: &str) -> PathBuf {
    PathBuf::from(format!("{}.runs", url.trim_start_matches("sqlite:")))
}

fn starts(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

/// The child's server: a slow agent (turns take a minute) and an ops agent
/// whose approved `closeAccount` notes its start and then hangs.
pub async fn server(url: &str) -> Server {
    let store = crate::replicas::open_store(url).await;
    let runs = marker(url);
    let close = tool(
        "closeAccount",
        "Closes an account",
        move |_ctx: ToolContext, a: Account| {
            let runs = runs.clone();
            async move {
                use std::io::Write as _;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&runs)
                    .unwrap();
                writeln!(f, "{}", a.account).unwrap();
                f.sync_all().unwrap();
                tokio::time::sleep(Duration::from_secs(120)).await;
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let model = ScriptedModel::from_fn("scripted/ops", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let account = last.text().strip_prefix("close ")?.to_owned();
        Some(ScriptedTurn::tool_call("closeAccount", json!({"account": account})))
    });
    let ops = Agent::builder("opsAgent")
        .model(Arc::new(model))
        .tool(close)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(store.clone())
        .build()
        .unwrap();
    Server::builder()
        .agent(ops)
        .agent(slow(store, Duration::from_secs(120)))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap()
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = client.post(url).json(&body).send().await.unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_turn_and_mid_resume_leaves_the_sqlite_file_whole_and_the_call_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let runs = marker(&url);
    let client = reqwest::Client::new();
    let mut child = ChildServer::start("sqlite-kill", Some(&url));

    let (code, body) = post(
        &client,
        child.url("/agents/opsAgent"),
        json!({"data": user("close a-1")}),
    )
    .await;
    assert_eq!(code, 200, "{body:#}");
    let out = body["result"].clone();
    assert_eq!(out["finishReason"], "interrupted", "{out:#}");
    let snapshot = out["snapshotId"].as_str().unwrap().to_owned();
    let approve = json!({"data": {"resume": {"restart": [restart(&paused_part(&out), json!({"toolApproved": true}))]}},
                         "init": {"snapshotId": snapshot}});

    // Mid-resume: the approval is claimed and the tool has started (and hangs).
    let resume = tokio::spawn({
        let (client, url, approve) = (client.clone(), child.url("/agents/opsAgent"), approve.clone());
        async move { client.post(url).json(&approve).send().await.map(|r| r.status()) }
    });
    for _ in 0..500 {
        if starts(&runs) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(starts(&runs), 1, "the approved tool started");
    // Mid-turn: another turn is running.
    let turn = tokio::spawn({
        let (client, url) = (client.clone(), child.url("/agents/slowAgent"));
        async move {
            client
                .post(url)
                .json(&json!({"data": user("work")}))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    child.child.kill().unwrap(); // SIGKILL
    child.child.wait().unwrap();
    assert!(
        resume.await.unwrap().is_err(),
        "the resume's caller saw the connection drop"
    );
    assert!(
        turn.await.unwrap().is_err(),
        "the turn's caller saw the connection drop"
    );

    // The file opens and every row reads.
    let store = crate::replicas::open_store(&url).await;
    let rows = store
        .list_snapshots(&SnapshotQuery {
            limit: Some(1000),
            ..SnapshotQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "the killed turn wrote nothing half-way: {rows:#?}");
    let claimed = store.get_snapshot(&snapshot).await.unwrap().unwrap();
    assert!(claimed.resumed_at.is_some(), "the claim survived the kill");
    assert!(claimed.state.is_some(), "its conversation is intact");
    assert!(!claimed.is_waiting(), "a claimed call is no longer pending");
    assert!(
        rows.iter().all(|r| r.parent_id.as_deref() != Some(snapshot.as_str())),
        "nothing after the claimed snapshot: the call is in doubt"
    );
    drop(store);

    // The next start neither re-runs the call nor lets it be answered again.
    let child = ChildServer::start("sqlite-kill", Some(&url));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, body) = post(&client, child.url("/agents/opsAgent"), approve).await;
    assert_eq!(code, 409, "{body:#}");
    assert_eq!(body["error"]["status"], "ABORTED", "{body:#}");
    let r = client.get(child.url("/agents/opsAgent/pending")).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["result"], json!([]));
    let (code, got) = post(
        &client,
        child.url("/agents/opsAgent/getSnapshot"),
        json!({"data": {"snapshotId": snapshot}}),
    )
    .await;
    assert_eq!(code, 200, "{got:#}");
    assert!(got["result"]["resumedAt"].is_string(), "{got:#}");
    assert_eq!(starts(&runs), 1, "the in-doubt call never ran again");
}
