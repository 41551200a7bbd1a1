//! SIGKILL of a server process mid-turn and mid-resume, on a SQLite file
//! and on a PostgreSQL database (docs/reference.md §8): afterwards every snapshot
//! reads, nothing half-written is visible, and the claimed call is in
//! doubt — a new process refuses to resume it, lists it as in doubt once
//! the dead process's claim lapses, and settles it with respond, without
//! ever running it again.

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
use holdpoint_testkit::TempPostgres;
use serde_json::{Value, json};

use crate::child::ChildServer;
use crate::support::*;

/// The environment variable naming the file where the hanging tool notes
/// each start.
pub const RUNS: &str = "HOLDPOINT_SERVER_CHILD_RUNS";

/// How long a resume's claim holds in the child without renewal: once the
/// child is killed, its call reads as in doubt after this.
const LEASE: Duration = Duration::from_millis(1500);

fn starts(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

/// The child's server: a slow agent (turns take two minutes) and an ops
/// agent whose approved `closeAccount` notes its start in `runs` and then
/// hangs.
pub async fn server(url: &str, runs: PathBuf) -> Server {
    let store = crate::replicas::open_store(url).await;
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
            let out = last.content[0].as_tool_response()?.output.clone()?;
            return Some(ScriptedTurn::text(format!("done: {out}")));
        }
        let account = last.text().strip_prefix("close ")?.to_owned();
        Some(ScriptedTurn::tool_call("closeAccount", json!({"account": account})))
    });
    let ops = Agent::builder("opsAgent")
        .model(Arc::new(model))
        .tool(close)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(store.clone())
        .resume_lease(LEASE)
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

async fn get(client: &reqwest::Client, url: String) -> (u16, Value) {
    let r = client.get(url).send().await.unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap())
}

/// The whole scenario on the store at `url`. `fresh` says the store held
/// nothing before, so every row in it can be checked.
async fn sigkill_leaves_the_call_in_doubt_until_settled(url: &str, fresh: bool) {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("closeAccount.runs");
    let runs_env = runs.display().to_string();
    let env = [(RUNS, runs_env.as_str())];
    let client = reqwest::Client::new();
    let mut child = ChildServer::start_with("kill", Some(url), &env);

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
    let session = out["sessionId"].as_str().unwrap().to_owned();
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

    // The store opens and every row reads; nothing half-written is visible.
    let store = crate::replicas::open_store(url).await;
    let all = SnapshotQuery {
        limit: Some(1000),
        ..SnapshotQuery::default()
    };
    let rows = store
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&all)
        .await
        .unwrap();
    if fresh {
        assert_eq!(rows.len(), 1, "the killed turn wrote nothing half-way: {rows:#?}");
    }
    let ours = SnapshotQuery {
        session_id: Some(session.clone()),
        ..all
    };
    let session_rows = store
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&ours)
        .await
        .unwrap();
    assert_eq!(session_rows.len(), 1, "{session_rows:#?}");
    let claimed = store.get_snapshot(&snapshot).await.unwrap().unwrap();
    assert!(claimed.resumed_at.is_some(), "the claim survived the kill");
    assert!(claimed.state.is_some(), "its conversation is intact");
    assert!(!claimed.is_waiting(), "a claimed call is no longer pending");
    assert!(
        rows.iter().all(|r| r.parent_id.as_deref() != Some(snapshot.as_str())),
        "nothing after the claimed snapshot: the call is in doubt"
    );
    drop(store);

    // A new process never re-runs the call and refuses to resume it again.
    let child = ChildServer::start_with("kill", Some(url), &env);
    let (code, body) = post(&client, child.url("/agents/opsAgent"), approve.clone()).await;
    assert_eq!(code, 409, "{body:#}");
    assert_eq!(body["error"]["status"], "ABORTED", "{body:#}");
    let pending = get(&client, child.url("/agents/opsAgent/pending")).await;
    assert_eq!(
        pending,
        (200, json!({"result": []})),
        "a call in doubt is not offered for approval"
    );

    // Once the dead process's claim lapses, the call reads as in doubt.
    let mut polls = 0;
    let listed = loop {
        let (code, body) = get(&client, child.url("/agents/opsAgent/inDoubt")).await;
        assert_eq!(code, 200, "{body:#}");
        let items = body["result"].as_array().unwrap().clone();
        if !items.is_empty() {
            break items;
        }
        polls += 1;
        assert!(polls < 200, "the dead process's claim never lapsed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (code, got) = post(
        &client,
        child.url("/agents/opsAgent/getSnapshot"),
        json!({"data": {"snapshotId": snapshot}}),
    )
    .await;
    assert_eq!(code, 200, "{got:#}");
    let lease_end: chrono::DateTime<chrono::Utc> = got["result"]["resumeLeaseUntil"].as_str().unwrap().parse().unwrap();
    assert!(
        lease_end <= chrono::Utc::now(),
        "the claim's heartbeat is stale: {got:#}"
    );
    let mine: Vec<&Value> = listed.iter().filter(|c| c["snapshotId"] == snapshot.as_str()).collect();
    assert_eq!(mine.len(), 1, "{listed:#?}");
    let call = mine[0];
    assert_eq!(call["inDoubt"], true, "{call:#}");
    assert_eq!(call["tool"], "closeAccount");
    assert_eq!(call["decided"][0]["decision"], "approve", "{call:#}");
    let (code, body) = post(&client, child.url("/agents/opsAgent"), approve).await;
    assert_eq!(code, 409, "still refused while in doubt: {body:#}");

    // The operator checked the account: it was closed. Respond settles it.
    let part = call["part"].clone();
    let answer = json!({"toolResponse": {"name": "closeAccount", "ref": part["toolRequest"]["ref"], "output": {"closed": "a-1"}}});
    let settle = json!({"data": {"snapshotId": snapshot, "resume": {"respond": [answer]}}});
    let (code, body) = post(&client, child.url("/agents/opsAgent/settle"), settle.clone()).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    assert!(
        body["result"]["message"].to_string().contains("a-1"),
        "the model saw the operator's answer: {body:#}"
    );
    assert_eq!(starts(&runs), 1, "the in-doubt call never ran again");

    // Settled: nothing in doubt, a second settlement is refused, audited.
    let (_, left) = get(&client, child.url("/agents/opsAgent/inDoubt")).await;
    assert!(
        left["result"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["snapshotId"] != snapshot.as_str()),
        "{left:#}"
    );
    let (code, body) = post(&client, child.url("/agents/opsAgent/settle"), settle).await;
    assert_eq!(code, 400, "{body:#}");
    assert_eq!(body["error"]["status"], "FAILED_PRECONDITION", "{body:#}");
    let (code, trail) = get(
        &client,
        child.url(&format!("/agents/opsAgent/audit?sessionId={session}")),
    )
    .await;
    assert_eq!(code, 200, "{trail:#}");
    let decisions: Vec<(&str, bool)> = trail["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["decision"].as_str().unwrap(), r["settles"] == true))
        .collect();
    assert_eq!(decisions, [("respond", true), ("approve", false)], "{trail:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_resume_on_sqlite_leaves_the_call_in_doubt_until_settled() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("sessions.db").display());
    sigkill_leaves_the_call_in_doubt_until_settled(&url, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_resume_on_postgres_leaves_the_call_in_doubt_until_settled() {
    let Some(pg) = TempPostgres::start_or_skip("sigkill_mid_resume_on_postgres_leaves_the_call_in_doubt_until_settled")
    else {
        return;
    };
    // Create the schema before the child connects.
    drop(crate::replicas::open_store(pg.url()).await);
    sigkill_leaves_the_call_in_doubt_until_settled(pg.url(), pg.is_private()).await;
}
