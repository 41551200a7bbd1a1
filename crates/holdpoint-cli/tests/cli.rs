//! The built `holdpoint` binary against a SQLite file and a live server.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::sync::Arc;

use holdpoint::agent::Agent;
use serde_json::{Value, json};

fn holdpoint<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(args: &[S]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_STORE")
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_API_KEY")
        .env_remove("HOLDPOINT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_of<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(args: &[S]) -> Value {
    let (ok, out, err) = holdpoint(args);
    assert!(ok, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

async fn seeded() -> (tempfile::TempDir, String, Agent) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let store = holdpoint_stores::open_store(&url).await.unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), Some(store)).unwrap();
    (dir, url, agent)
}

#[tokio::test]
async fn store_listings_show_the_paused_transfer_and_the_stock_binary_asks_for_a_server() {
    let (_dir, url, agent) = seeded().await;
    let out = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snapshot = out.snapshot_id.clone().unwrap();

    let pending = json_of(&["--store", &url, "pending", "--json"]);
    assert_eq!(pending[0]["tool"], "transferMoney", "{pending}");
    assert_eq!(pending[0]["snapshotId"], snapshot.as_str());
    let reference = pending[0]["ref"].as_str().unwrap().to_owned();

    let (ok, table, _) = holdpoint(&["--store", &url, "pending"]);
    assert!(ok);
    assert!(table.starts_with("SNAPSHOT"), "{table}");
    assert!(table.contains("transferMoney") && table.contains(&reference), "{table}");

    let sessions = json_of(&["--store", &url, "sessions", "list", "--json", "--agent", "bankingAgent"]);
    assert_eq!(sessions[0]["sessionId"], out.session_id.as_str(), "{sessions}");
    assert_eq!(sessions[0]["waiting"], true);
    let none = json_of(&["--store", &url, "sessions", "list", "--json", "--agent", "otherAgent"]);
    assert_eq!(none, json!([]));

    let (ok, shown, _) = holdpoint(&["--store", &url, "sessions", "show", &out.session_id]);
    assert!(ok);
    assert!(
        shown.contains("waiting for an answer") && shown.contains("Transfer $500.00 to savings"),
        "{shown}"
    );

    let (ok, _, err) = holdpoint(&["--store", &url, "approve", &snapshot, &reference]);
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--server"), "{err}");
}

/// `--config FILE` names the store by its `[server] store` when `--store`
/// is not given (`--store` wins); a bad store in the file is refused with
/// the file, line and key; with neither, the binary asks where to look.
#[tokio::test]
async fn the_config_files_store_is_used_unless_store_is_given() {
    let (dir, url, agent) = seeded().await;
    agent.run_text("Transfer $500 to savings").await.unwrap();
    let path = dir.path().join("holdpoint.toml");
    let config = path.to_str().unwrap();
    std::fs::write(&path, format!("[server]\nstore = {url:?}\n")).unwrap();
    let pending = json_of(&["--config", config, "pending", "--json"]);
    assert_eq!(pending[0]["tool"], "transferMoney", "{pending}");
    let empty = json_of(&["--config", config, "--store", "memory:", "pending", "--json"]);
    assert_eq!(empty, json!([]), "--store wins over the file");

    std::fs::write(&path, "[server]\nstore = \"sqlite:\"\n").unwrap();
    let (ok, _, err) = holdpoint(&["--config", config, "pending"]);
    assert!(!ok && err.contains(&format!("{config}:2:9: `server.store`")), "{err}");
    std::fs::write(&path, "").unwrap();
    let (ok, _, err) = holdpoint(&["--config", config, "pending"]);
    assert!(
        !ok && err.contains("--store URL") && err.contains("--config FILE"),
        "{err}"
    );
}

#[tokio::test]
async fn a_binary_with_agents_approves_and_denies_against_the_store_in_process() {
    let (_dir, url, agent) = seeded().await;
    let transfer = agent.run_text("Transfer $500 to savings").await.unwrap();
    let close = agent.run_text("close my savings account").await.unwrap();
    let pending = json_of(&["--store", &url, "pending", "--json"]);
    assert_eq!(pending.as_array().unwrap().len(), 2, "{pending}");
    let call = |snapshot: &str| {
        let item = pending
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["snapshotId"] == snapshot)
            .unwrap();
        item["ref"].as_str().unwrap().to_owned()
    };
    let (t_snap, c_snap) = (transfer.snapshot_id.unwrap(), close.snapshot_id.unwrap());
    let t_ref = call(&t_snap);
    assert!(!call(&c_snap).is_empty());

    holdpoint_cli::run_from(
        ["holdpoint", "--store", &url, "approve", &t_snap, &t_ref],
        vec![agent.clone()],
    )
    .await
    .unwrap();
    holdpoint_cli::run_from(
        // One paused call in the snapshot: its ref may be left out.
        ["holdpoint", "deny", &c_snap, "--reason", "fraud suspected"],
        vec![agent.clone()],
    )
    .await
    .unwrap();

    let after = agent
        .latest_snapshot(&transfer.session_id, holdpoint::agent::Access::Full)
        .await
        .unwrap()
        .unwrap();
    assert!(!after.is_waiting());
    let text = serde_json::to_string(&after.state).unwrap();
    assert!(text.contains("Done: txn-123"), "{text}");

    let audit = json_of(&["--store", &url, "audit", "--json"]);
    let decisions: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["decision"].as_str().unwrap()))
        .collect();
    assert!(decisions.contains(&("transferMoney", "approve")), "{audit}");
    assert!(decisions.contains(&("closeAccount", "deny")), "{audit}");
    assert!(audit.to_string().contains("fraud suspected"));
    assert_eq!(json_of(&["--store", &url, "pending", "--json"]), json!([]));

    let (ok, table, _) = holdpoint(&["--store", &url, "audit"]);
    assert!(
        ok && table.starts_with("AT") && table.contains("closeAccount"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_live_server_pending_approve_and_audit() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), Some(store)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .api_keys(holdpoint_server::auth::ApiKeys::new().key("k-operator-0123456789", "ops"))
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });

    let turn: Value = reqwest::Client::new()
        .post(format!("{base}/agents/bankingAgent"))
        .header("X-API-Key", "k-operator-0123456789")
        .json(&json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");

    let (ok, _, err) = holdpoint(&["--server", &base, "pending"]);
    assert!(!ok && err.contains("--api-key"), "{err}");

    let key = ["--server", &base, "--api-key", "k-operator-0123456789"];
    let with = |rest: &[&str]| -> Vec<String> { key.iter().chain(rest).map(|s| s.to_string()).collect() };
    let pending = json_of(&with(&["pending", "--json"]));
    let snapshot = pending[0]["snapshotId"].as_str().unwrap().to_owned();
    let reference = pending[0]["ref"].as_str().unwrap().to_owned();

    let (ok, out, err) = holdpoint(&with(&["approve", &snapshot, &reference, "--reason", "checked"]));
    assert!(ok, "{err}");
    assert!(out.contains("ended: stop") && out.contains("Done: txn-123"), "{out}");

    let audit = json_of(&with(&["audit", "--json"]));
    assert_eq!(audit[0]["tool"], "transferMoney", "{audit}");
    assert_eq!(audit[0]["principal"], "ops");
    assert_eq!(json_of(&with(&["pending", "--json"])), json!([]));

    let (ok, _, err) = holdpoint(&with(&["sessions", "list"]));
    assert!(!ok && err.contains("--store"), "{err}");
}

/// Claims `snapshot` as a resume that died at once would have: the claim's
/// lease already lapsed and nothing follows it.
async fn claim_and_die(agent: &Agent, snapshot: &str) {
    let store = agent.store().unwrap();
    let claim = holdpoint::session::ResumeClaim {
        snapshot_id: snapshot.to_owned(),
        lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
        takeover: false,
    };
    store.claim_resume(claim, Vec::new()).await.unwrap();
}

#[tokio::test]
async fn calls_in_doubt_are_listed_refused_and_settled_against_the_store() {
    let (_dir, url, agent) = seeded().await;
    let out = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snapshot = out.snapshot_id.clone().unwrap();
    let reference = json_of(&["--store", &url, "pending", "--json"])[0]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    claim_and_die(&agent, &snapshot).await;

    assert_eq!(json_of(&["--store", &url, "pending", "--json"]), json!([]));
    let listed = json_of(&["--store", &url, "in-doubt", "--json"]);
    assert_eq!(listed[0]["snapshotId"], snapshot.as_str(), "{listed}");
    assert_eq!(listed[0]["inDoubt"], true);
    let (ok, table, _) = holdpoint(&["--store", &url, "in-doubt"]);
    assert!(
        ok && table.contains("transferMoney") && table.contains("holdpoint settle"),
        "{table}"
    );

    // An ordinary approval is refused and points at settle.
    let refused = holdpoint_cli::run_from(
        ["holdpoint", "--store", &url, "approve", &snapshot, &reference],
        vec![agent.clone()],
    )
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("in doubt"), "{refused}");
    // The stock binary cannot run the rest of the turn.
    let (ok, _, err) = holdpoint(&["--store", &url, "settle", &snapshot, &reference, "--output", "{}"]);
    assert!(!ok && err.contains("--server"), "{err}");
    // Neither or both of --output and --rerun is a usage error.
    let (ok, _, err) = holdpoint(&["--store", &url, "settle", &snapshot, &reference]);
    assert!(!ok && err.contains("--output"), "{err}");

    let output = r#"{"success": true, "transactionId": "txn-777"}"#;
    holdpoint_cli::run_from(
        [
            "holdpoint",
            "--store",
            &url,
            "settle",
            &snapshot,
            &reference,
            "--output",
            output,
        ],
        vec![agent.clone()],
    )
    .await
    .unwrap();
    let after = agent
        .latest_snapshot(&out.session_id, holdpoint::agent::Access::Full)
        .await
        .unwrap()
        .unwrap();
    let text = serde_json::to_string(&after.state).unwrap();
    assert!(
        text.contains("Done: txn-777"),
        "the model got the operator's answer: {text}"
    );
    assert_eq!(json_of(&["--store", &url, "in-doubt", "--json"]), json!([]));
    let audit = json_of(&["--store", &url, "audit", "--json"]);
    assert_eq!(audit[0]["decision"], "respond", "{audit}");
    assert_eq!(audit[0]["settles"], true, "{audit}");
    assert_eq!(audit[0]["actor"], "holdpoint-cli", "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_doubt_are_settled_through_a_server() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), Some(store)).unwrap();
    let held = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snapshot = held.snapshot_id.clone().unwrap();
    claim_and_die(&agent, &snapshot).await;
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(agent.clone())
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });

    let listed = json_of(&["--server", &base, "in-doubt", "--json"]);
    assert_eq!(listed[0]["snapshotId"], snapshot.as_str(), "{listed}");
    let reference = listed[0]["ref"].as_str().unwrap().to_owned();
    let (ok, out, err) = holdpoint(&[
        "--server",
        &base,
        "settle",
        &snapshot,
        &reference,
        "--output",
        r#"{"success": true, "transactionId": "txn-778"}"#,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("settled") && out.contains("Done: txn-778"), "{out}");
    assert_eq!(json_of(&["--server", &base, "in-doubt", "--json"]), json!([]));
    let (ok, _, err) = holdpoint(&["--server", &base, "settle", &snapshot, &reference, "--rerun"]);
    assert!(!ok && err.contains("not in doubt"), "{err}");
}

/// The approvers of issue 20 through the stock binary against a live
/// server: who may answer, `1 of 2 approvals recorded`, the same approver
/// twice counting once, the owner refused, a denial recorded `deny`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvers_answer_through_a_server_with_their_own_keys() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        name: Some("large transfers".into()),
        agent: Some("bankingAgent".into()),
        tool: Some("transferMoney".into()),
        when: Some("input.amount > 10000".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
        ..Default::default()
    }])
    .unwrap();
    let agent = banking::banking_agent_with_policy(Arc::new(banking::demo_model()), Some(store), Some(policy)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let keys = holdpoint_server::auth::ApiKeys::new()
        .key_with_roles("k-alice-0123456789", "alice", ["customer"])
        .key_with_roles("k-olga-0123456789", "olga", ["finance"])
        .key_with_roles("k-pete-0123456789", "pete", ["finance"]);
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .api_keys(keys)
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let ask = |text: &'static str| {
        let base = base.clone();
        async move {
            let turn: Value = reqwest::Client::new()
                .post(format!("{base}/agents/bankingAgent"))
                .header("X-API-Key", "k-alice-0123456789")
                .json(&json!({"data": {"message": {"role": "user", "content": [{"text": text}]}}}))
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
    let snapshot = ask("Transfer $50000 to savings").await;
    let as_key = |key: &str, rest: &[&str]| -> Vec<String> {
        ["--server", base.as_str(), "--api-key", key]
            .iter()
            .chain(rest)
            .map(|s| s.to_string())
            .collect()
    };
    let olga = |rest: &[&str]| as_key("k-olga-0123456789", rest);
    let pending = json_of(&olga(&["pending", "--json"]));
    assert_eq!(pending[0]["snapshotId"], snapshot.as_str(), "{pending}");
    let reference = pending[0]["ref"].as_str().unwrap().to_owned();
    let (ok, table, err) = holdpoint(&olga(&["pending"]));
    assert!(ok, "{err}");
    assert!(
        table.contains("finance (not alice)") && table.contains("0 of 2"),
        "{table}"
    );

    let (ok, _, err) = holdpoint(&as_key("k-alice-0123456789", &["approve", &snapshot, &reference]));
    assert!(!ok && err.contains("403") && err.contains("large transfers"), "{err}");

    let (ok, out, err) = holdpoint(&olga(&["approve", &snapshot, &reference]));
    assert!(ok, "{err}");
    assert!(out.contains("1 of 2 approvals recorded (olga)"), "{out}");
    let (_, out, _) = holdpoint(&olga(&["approve", &snapshot, &reference]));
    assert!(
        out.contains("1 of 2 approvals recorded") && out.contains("counts once"),
        "{out}"
    );
    let (_, table, _) = holdpoint(&olga(&["pending"]));
    assert!(table.contains("1 of 2: olga"), "{table}");

    let (ok, out, err) = holdpoint(&as_key("k-pete-0123456789", &["approve", &snapshot, &reference]));
    assert!(ok, "{err}");
    assert!(out.contains("ended: stop") && out.contains("Done: txn-123"), "{out}");

    let denied = ask("Transfer $60000 to savings").await;
    let pending = json_of(&olga(&["pending", "--json"]));
    let reference = pending[0]["ref"].as_str().unwrap().to_owned();
    let (ok, out, err) = holdpoint(&olga(&["deny", &denied, &reference, "--reason", "fraud suspected"]));
    assert!(ok, "{err}");
    assert!(out.contains("The transfer was not made"), "{out}");
    let audit = json_of(&as_key("k-alice-0123456789", &["audit", "--json"]));
    let rows: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["decision"].as_str().unwrap(), r["actor"].as_str().unwrap()))
        .collect();
    assert!(
        rows.contains(&("approve", "olga")) && rows.contains(&("approve", "pete")),
        "{audit}"
    );
    assert!(rows.contains(&("deny", "olga")), "{audit}");
}

#[tokio::test]
async fn serve_with_a_bad_config_file_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.toml");
    std::fs::write(
        &path,
        "[[auth.api_keys]]\nprincipal = \"ops\"\nkey = \"k-ops-0123456789\"\nrole = [\"finance\"]\n",
    )
    .unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), None).unwrap();
    let args = ["holdpoint", "serve", "--config", path.to_str().unwrap()];
    let err = holdpoint_cli::run_from(args, vec![agent]).await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}:4:1: `auth.api_keys[0].role`: unknown key", path.display())),
        "{text}"
    );
    assert!(!text.contains("k-ops-0123456789"), "{text}");
}

#[tokio::test]
async fn notifications_are_listed_and_a_dead_one_is_retried_against_the_store() {
    use holdpoint::session::OutboxOutcome;
    let (_dir, url, agent) = seeded().await;
    let out = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snapshot = out.snapshot_id.clone().unwrap();

    let listed = json_of(&["--store", &url, "notifications", "list", "--json"]);
    let created: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "hold.created")
        .collect();
    assert_eq!(created.len(), 1, "{listed}");
    assert_eq!(created[0]["snapshotId"], snapshot.as_str());
    assert_eq!(created[0]["state"], "pending");
    let id = created[0]["id"].as_str().unwrap().to_owned();

    // A worker gave up on it.
    let store = holdpoint_stores::open_store(&url).await.unwrap();
    let claimed = store
        .capabilities()
        .outbox()
        .unwrap()
        .claim_outbox(chrono::Utc::now(), 100, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let lease = claimed.iter().find(|l| l.event.id == id).unwrap();
    store
        .capabilities()
        .outbox()
        .unwrap()
        .settle_outbox(
            &id,
            &lease.token,
            OutboxOutcome::Dead {
                error: "webhook:0: HTTP 500".into(),
                done: vec![],
            },
        )
        .await
        .unwrap();
    let (ok, table, err) = holdpoint(&["--store", &url, "notifications", "list", "--state", "dead"]);
    assert!(ok, "{err}");
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains(&id) && table.contains("dead") && table.contains("HTTP 500"),
        "{table}"
    );

    let (ok, said, err) = holdpoint(&["--store", &url, "notifications", "retry", &id]);
    assert!(ok, "{err}");
    assert!(said.contains("pending again"), "{said}");
    let pending = json_of(&["--store", &url, "notifications", "list", "--state", "pending", "--json"]);
    assert!(
        pending.as_array().unwrap().iter().any(|e| e["id"] == id.as_str()),
        "{pending}"
    );

    let (ok, _, err) = holdpoint(&["--store", &url, "notifications", "retry", "no-such-id"]);
    assert!(!ok);
    assert!(err.contains("not found"), "{err}");
    let (ok, _, err) = holdpoint(&["--store", &url, "notifications", "list", "--state", "lost"]);
    assert!(!ok);
    assert!(err.contains("expected pending"), "{err}");
}

/// An agent whose `payBill` (the user's message is the amount) is held
/// for finance, never its owner.
fn payer(store: Arc<dyn holdpoint::session::SessionStore>) -> Agent {
    use holdpoint::{ScriptedModel, ScriptedTurn};
    let pay = holdpoint::tool::DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        |_ctx: holdpoint::tool::ToolContext, input: Value| async move { Ok(json!({"paid": input["amount"]})) },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/payer", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("paid"));
        }
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        name: Some("bills".into()),
        tool: Some("payBill".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..Default::default()
    }])
    .unwrap();
    Agent::builder("payer")
        .model(Arc::new(model))
        .tool(pay)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

/// Standing grants through the stock binary against a live server:
/// `approve --grant` makes one, the next call runs without a hold,
/// `grants list` shows it to finance (not to a customer), a customer
/// cannot revoke it, `grants revoke` stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_made_listed_and_revoked_through_a_server() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let keys = holdpoint_server::auth::ApiKeys::new()
        .key_with_roles("k-alice-0123456789", "alice", ["customer"])
        .key_with_roles("k-olga-0123456789", "olga", ["finance"]);
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(payer(store))
        .api_keys(keys)
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let pay = |amount: u64, session: Option<String>| {
        let base = base.clone();
        async move {
            let mut body = json!({"data": {"message": {"role": "user", "content": [{"text": amount.to_string()}]}}});
            if let Some(id) = session {
                body["init"] = json!({"sessionId": id});
            }
            let turn: Value = reqwest::Client::new()
                .post(format!("{base}/agents/payer"))
                .header("X-API-Key", "k-alice-0123456789")
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            turn["result"].clone()
        }
    };
    let as_key = |key: &str, rest: &[&str]| -> Vec<String> {
        ["--server", base.as_str(), "--api-key", key]
            .iter()
            .chain(rest)
            .map(|s| s.to_string())
            .collect()
    };
    let olga = |rest: &[&str]| as_key("k-olga-0123456789", rest);
    let alice = |rest: &[&str]| as_key("k-alice-0123456789", rest);

    let held = pay(50, None).await;
    assert_eq!(held["finishReason"], "interrupted", "{held}");
    let snapshot = held["snapshotId"].as_str().unwrap().to_owned();
    let session = held["sessionId"].as_str().unwrap().to_owned();
    let pending = json_of(&olga(&["pending", "--json"]));
    let reference = pending[0]["ref"].as_str().unwrap().to_owned();

    let (ok, _, err) = holdpoint(&olga(&["approve", &snapshot, &reference, "--grant", "forever"]));
    assert!(!ok && err.contains("unknown grant scope"), "{err}");
    let (ok, _, err) = holdpoint(&olga(&["approve", &snapshot, &reference, "--grant-uses", "2"]));
    assert!(!ok && err.contains("--grant"), "a grant option needs --grant: {err}");
    let (ok, _, err) = holdpoint(&alice(&["approve", &snapshot, &reference, "--grant", "session"]));
    assert!(!ok && err.contains("403"), "the owner may not: {err}");
    let (ok, out, err) = holdpoint(&olga(&[
        "approve",
        &snapshot,
        &reference,
        "--grant",
        "session",
        "--grant-uses",
        "3",
        "--grant-ttl",
        "1h",
    ]));
    assert!(ok, "{err}");
    assert!(
        out.contains("approved; granted") && out.contains("granted by olga"),
        "{out}"
    );

    let next = pay(60, Some(session.clone())).await;
    assert_eq!(next["finishReason"], "stop", "the grant stands in: {next}");

    let listed = json_of(&olga(&["grants", "list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["usesLeft"], 2);
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let (ok, table, err) = holdpoint(&olga(&["grants", "list"]));
    assert!(
        ok && table.contains(&id) && table.contains("2 uses left"),
        "{table}{err}"
    );
    let theirs = json_of(&alice(&["grants", "list", "--json"]));
    assert_eq!(theirs, json!([]), "a customer manages no grant");
    let (ok, _, err) = holdpoint(&alice(&["grants", "revoke", &id]));
    assert!(!ok && err.contains("not found"), "{err}");

    let (ok, out, err) = holdpoint(&olga(&["grants", "revoke", &id]));
    assert!(
        ok && out.contains("revoked") && out.contains("revoked by olga"),
        "{out}{err}"
    );
    let again = pay(70, Some(session)).await;
    assert_eq!(again["finishReason"], "interrupted", "held again: {again}");
    let active = json_of(&olga(&["grants", "list", "--active", "--json"]));
    assert_eq!(active, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_listed_retried_and_endpoints_enabled_through_a_server() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), Some(Arc::clone(&store))).unwrap();
    let out = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snapshot = out.snapshot_id.clone().unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .api_keys(
            holdpoint_server::auth::ApiKeys::new()
                .key_with_roles("k-operator-0123456789", "oscar", [holdpoint_server::OPERATOR_ROLE])
                .key("k-clerk-0123456789ab", "clara"),
        )
        .notifications(Arc::clone(&store))
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let as_key = |key: &str, rest: &[&str]| -> Vec<String> {
        ["--server", base.as_str(), "--api-key", key]
            .iter()
            .chain(rest)
            .map(|s| s.to_string())
            .collect()
    };
    let operator = |rest: &[&str]| as_key("k-operator-0123456789", rest);

    let listed = json_of(&operator(&["notifications", "list", "--json"]));
    let created: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "hold.created")
        .collect();
    assert_eq!(created.len(), 1, "{listed}");
    assert_eq!(created[0]["snapshotId"], snapshot.as_str());
    assert_eq!(created[0]["state"], "pending");
    let id = created[0]["id"].as_str().unwrap().to_owned();
    let (ok, table, err) = holdpoint(&operator(&["notifications", "list"]));
    assert!(ok && table.starts_with("ID") && table.contains(&id), "{table}{err}");

    // A stopped endpoint is listed and re-enabled by name.
    store
        .capabilities()
        .outbox()
        .unwrap()
        .stop_endpoint(holdpoint::session::EndpointStop {
            channel: "webhook:0".into(),
            fingerprint: "f".into(),
            reason: "HTTP 410 Gone".into(),
            stopped_at: chrono::Utc::now(),
        })
        .await
        .unwrap();
    let (ok, table, _) = holdpoint(&operator(&["notifications", "list"]));
    assert!(ok && table.contains("endpoint webhook:0 is stopped"), "{table}");
    let (ok, said, err) = holdpoint(&operator(&["notifications", "enable", "webhook:0"]));
    assert!(ok, "{err}");
    assert!(said.contains("webhook:0 gets deliveries again"), "{said}");
    let (ok, _, err) = holdpoint(&operator(&["notifications", "enable", "webhook:0"]));
    assert!(!ok && err.contains("not stopped"), "{err}");

    let (ok, said, err) = holdpoint(&operator(&["notifications", "retry", &id]));
    assert!(ok, "{err}");
    assert!(said.contains("pending again"), "{said}");
    let (ok, _, err) = holdpoint(&operator(&["notifications", "retry", "no-such-id"]));
    assert!(!ok && err.contains("not found"), "{err}");
    let (ok, _, err) = holdpoint(&operator(&["notifications", "list", "--state", "lost"]));
    assert!(!ok && err.contains("expected pending"), "{err}");

    // A key without the operator role is refused, naming the role.
    let (ok, _, err) = holdpoint(&as_key("k-clerk-0123456789ab", &["notifications", "list"]));
    assert!(!ok && err.contains("operator"), "{err}");
}

/// Issue 32, finding 5: `respond` with an output the tool's schema refuses
/// exits non-zero and claims nothing; the correct answer still works.
#[tokio::test]
async fn a_bad_respond_output_fails_the_command_and_keeps_the_hold() {
    let (_dir, url, agent) = seeded().await;
    let transfer = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snap = transfer.snapshot_id.clone().unwrap();
    let bad = holdpoint_cli::run_from(
        [
            "holdpoint",
            "--store",
            &url,
            "respond",
            &snap,
            "--output",
            r#"{"success": 1}"#,
        ],
        vec![agent.clone()],
    )
    .await;
    let err = bad.expect_err("a bad output is refused");
    assert_ne!(err.exit_code(), 0);
    assert!(err.to_string().to_lowercase().contains("invalid"), "{err}");
    let still = json_of(&["--store", &url, "pending", "--json"]);
    assert_eq!(still.as_array().unwrap().len(), 1, "still answerable: {still}");
    holdpoint_cli::run_from(
        [
            "holdpoint",
            "--store",
            &url,
            "respond",
            &snap,
            "--output",
            r#"{"success": true, "transactionId": "txn-1"}"#,
        ],
        vec![agent.clone()],
    )
    .await
    .unwrap();
    assert_eq!(json_of(&["--store", &url, "pending", "--json"]), json!([]));
}

/// Issue 33, item 8: `approve --input` runs the call with the edited input
/// (through a live server, as the caller); JSON that does not parse, or
/// that the tool's input schema refuses, fails the command and keeps the
/// hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_with_an_edited_input_through_a_server() {
    let store = holdpoint_stores::open_store("memory:").await.unwrap();
    let agent = banking::banking_agent(Arc::new(banking::demo_model()), Some(store)).unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = holdpoint_server::Server::builder()
        .agent(agent)
        .api_keys(holdpoint_server::auth::ApiKeys::new().key("k-operator-0123456789", "ops"))
        .data_dir(data.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });
    let turn: Value = reqwest::Client::new()
        .post(format!("{base}/agents/bankingAgent"))
        .header("X-API-Key", "k-operator-0123456789")
        .json(&json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let key = ["--server", &base, "--api-key", "k-operator-0123456789"];
    let with = |rest: &[&str]| -> Vec<String> { key.iter().chain(rest).map(|s| s.to_string()).collect() };
    let pending = json_of(&with(&["pending", "--json"]));
    let snapshot = pending[0]["snapshotId"].as_str().unwrap().to_owned();

    let (ok, _, err) = holdpoint(&with(&["approve", &snapshot, "--input", "{amount: 400"]));
    assert!(!ok, "{err}");
    assert!(err.contains("--input is not valid JSON"), "{err}");
    let (ok, _, err) = holdpoint(&with(&["approve", &snapshot, "--input", r#"{"amount": "lots"}"#]));
    assert!(!ok, "{err}");
    assert!(err.contains("INVALID_ARGUMENT"), "{err}");
    assert!(err.contains("replaced input"), "names what was refused: {err}");
    let (ok, _, err) = holdpoint(&with(&["deny", &snapshot, "--input", r#"{"amount": 1}"#]));
    assert!(!ok && err.contains("--input goes with approve"), "{err}");
    assert_eq!(
        json_of(&with(&["pending", "--json"])).as_array().unwrap().len(),
        1,
        "still answerable"
    );

    let (ok, out, err) = holdpoint(&with(&[
        "approve",
        &snapshot,
        "--input",
        r#"{"amount": 400, "toAccount": "savings"}"#,
    ]));
    assert!(ok, "{err}");
    assert!(out.starts_with("approved with the edited input"), "{out}");
    assert!(out.contains("ended: stop") && out.contains("Done: txn-123"), "{out}");
    assert_eq!(json_of(&with(&["pending", "--json"])), json!([]));
    let audit = json_of(&with(&["audit", "--json"]));
    assert!(
        audit[0].to_string().contains("400"),
        "the audit shows the edited input: {audit}"
    );
}

/// `approve --input` against the store, in-process: the edited call runs.
#[tokio::test]
async fn approve_with_an_edited_input_against_the_store() {
    let (_dir, url, agent) = seeded().await;
    let transfer = agent.run_text("Transfer $500 to savings").await.unwrap();
    let snap = transfer.snapshot_id.clone().unwrap();
    let bad = holdpoint_cli::run_from(
        [
            "holdpoint",
            "--store",
            &url,
            "approve",
            &snap,
            "--input",
            r#"{"amount": -3, "toAccount": "savings"}"#,
        ],
        vec![agent.clone()],
    )
    .await;
    let err = bad.expect_err("a bad input is refused");
    assert_ne!(err.exit_code(), 0);
    assert!(err.to_string().contains("replaced input of transferMoney"), "{err}");
    let still = json_of(&["--store", &url, "pending", "--json"]);
    assert_eq!(still.as_array().unwrap().len(), 1, "nothing claimed: {still}");
    holdpoint_cli::run_from(
        [
            "holdpoint",
            "--store",
            &url,
            "approve",
            &snap,
            "--input",
            r#"{"amount": 400, "toAccount": "savings"}"#,
        ],
        vec![agent.clone()],
    )
    .await
    .unwrap();
    let after = agent
        .latest_snapshot(&transfer.session_id, holdpoint::agent::Access::Full)
        .await
        .unwrap()
        .unwrap();
    let text = serde_json::to_string(&after.state).unwrap();
    assert!(text.contains("Done: txn-123") && text.contains("400"), "{text}");
}
