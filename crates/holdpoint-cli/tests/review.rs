//! What `holdpoint` shows of a hold and what it may do with one
//! (docs/reference.md §22) against a live server: the tool's preview is
//! the `WHAT` column, a redacted secret is in no output (table or JSON),
//! and a hold too large to review refuses `approve` while `deny` answers it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::sync::{Arc, Mutex};

use holdpoint::agent::Agent;
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::review::{HoldView, Preview};
use holdpoint::session::InMemoryStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

const SECRET: &str = "tok-PLANTED-SECRET-5531";
const KEY: &str = "k-approver-0123456789abc";

/// `deploy` masks its `token` and previews the release; a deploy of more
/// than 300 bytes is not approvable as is. The user's message is the
/// number of services to deploy (each name adds to the input's size).
fn agent(ran: Arc<Mutex<Vec<Value>>>) -> Agent {
    let deploy = DynamicTool::new(
        "deploy",
        "Deploys services",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            ran.lock().unwrap().push(input.clone());
            async move { Ok(json!({"deployed": true})) }
        },
    )
    .hold_view(HoldView::new().redact(["token"]).unwrap().preview(|input| {
        let n = input["services"].as_array().map_or(0, Vec::len);
        Ok(Preview::new(format!("Deploy {n} services to production")).touches(n as u64))
    }))
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/deploy", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("deployed"));
        }
        let n: usize = last.text().trim().parse().ok()?;
        let services: Vec<String> = (0..n).map(|i| format!("service-number-{i:03}")).collect();
        Some(ScriptedTurn::tool_call(
            "deploy",
            json!({"services": services, "token": SECRET}),
        ))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("releases".into()),
        tool: Some("deploy".into()),
        approvers: vec!["ops".into()],
        max_review_bytes: Some(300),
        ..RuleSpec::default()
    }])
    .unwrap();
    Agent::builder("releaser")
        .model(Arc::new(model))
        .tool(deploy)
        .approval_policy(policy)
        .store(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

fn holdpoint(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_API_KEY")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_the_preview_never_the_secret_and_refuses_an_unreviewable_approval() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let server = holdpoint_server::Server::builder()
        .agent(agent(Arc::clone(&ran)))
        .api_keys(holdpoint_server::auth::ApiKeys::new().key_with_roles(KEY, "olga", ["ops"]))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let http = reqwest::Client::new();
    let hold = |n: usize| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let turn: Value = http
                .post(format!("{base}/agents/releaser"))
                .header("X-API-Key", KEY)
                .json(&json!({"data": {"message": {"role": "user", "content": [{"text": n.to_string()}]}}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
            turn["result"]["snapshotId"].as_str().unwrap().to_owned()
        }
    };
    let small = hold(2).await;
    let large = hold(20).await;
    let cli = |args: &[&str]| {
        let mut all = vec!["--server", base.as_str(), "--api-key", KEY];
        all.extend_from_slice(args);
        holdpoint(&all)
    };

    let (ok, table, err) = cli(&["pending"]);
    assert!(ok, "{err}");
    assert!(table.contains("WHAT"), "{table}");
    assert!(table.contains("Deploy 2 services to production"), "{table}");
    assert!(table.contains("(deny or edit only)"), "the large one says so: {table}");
    assert!(!table.contains(SECRET), "{table}");
    let (ok, listed, err) = cli(&["--json", "pending"]);
    assert!(ok, "{err}");
    assert!(!listed.contains(SECRET), "{listed}");
    assert!(listed.contains("[redacted]"), "{listed}");

    // The large deploy cannot be approved as is; it can be denied.
    let (ok, _, err) = cli(&["approve", &large]);
    assert!(!ok, "approving an unreviewable hold must fail");
    assert!(err.contains("cannot be approved as is"), "{err}");
    assert!(!err.contains(SECRET), "{err}");
    let (ok, out, err) = cli(&["deny", &large, "--reason", "split it up"]);
    assert!(ok, "{err}");
    assert!(!out.contains(SECRET), "{out}");

    // The small one is approved and runs with the whole token.
    let (ok, out, err) = cli(&["approve", &small]);
    assert!(ok, "{err}");
    assert!(!out.contains(SECRET), "{out}");
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 1, "only the approved deploy ran");
    assert_eq!(ran[0]["token"], SECRET);
    assert_eq!(ran[0]["services"].as_array().unwrap().len(), 2);
}
