//! The `banking` binary, driven as a user would: answers piped on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::serve;

fn banking(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_banking"))
        .args(args)
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("HOLDPOINT_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn chat_pauses_for_approval_and_finishes_with_a_transaction_id() {
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "Transfer $500 to savings"],
        "y\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("scripted demo model"), "says which model it uses: {err}");
    let pause = out.find("approval needed: Transfer $500.00 to savings").expect(&out);
    let done = out.find("assistant> Done: txn-123").expect(&out);
    assert!(pause < done);
}

/// Issue 32, finding 5: a JSON answer the tool's output schema refuses is
/// asked again, not sent (it would be refused and the chat end).
#[test]
fn chat_asks_again_for_a_json_answer_that_does_not_fit() {
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "Transfer $500 to savings"],
        "{\"amount\": 250}\ny\n",
    );
    assert!(ok, "{out}\n{err}");
    let refused = out.find("that answer does not fit").expect(&out);
    let done = out.find("assistant> Done: txn-123").expect(&out);
    assert!(refused < done, "{out}");
    assert!(!out[..refused].contains("✔ answered"), "{out}");
}

/// Issue 33, item 8: with `--store memory:` a call left waiting when the
/// input ends is lost with the process, and the chat says so.
#[test]
fn chat_on_a_memory_store_does_not_promise_to_keep_a_waiting_call() {
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "Transfer $500 to savings"],
        "",
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("it is lost when the chat exits"), "{out}");
    assert!(!out.contains("keeps it paused"), "{out}");
}

#[test]
fn chat_denial_with_a_reason_reaches_the_model() {
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "close my savings account"],
        "n fraud suspected\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("Tool not in approved list: closeAccount"), "{out}");
    assert!(
        out.contains("not closed (the tool call was denied; reason: fraud suspected)"),
        "{out}"
    );
}

#[test]
fn unknown_store_and_model_fail_with_one_clear_line() {
    let (ok, _, err) = banking(&["chat", "--store", "redis://x"], "");
    assert!(!ok);
    assert!(err.contains("unsupported store URL"), "{err}");
    let (ok, _, err) = banking(&["chat", "--store", "memory:", "--model", "nope/x"], "");
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn demo_shows_three_ways_to_resume() {
    let (ok, out, err) = banking(&["demo"], "");
    assert!(ok, "{out}\n{err}");
    assert_eq!(out.matches("assistant: Done: txn-123").count(), 3, "{out}");
}

#[tokio::test]
async fn serve_answers_healthz_and_a_held_transfer_is_approved_over_http() {
    let s = serve(&[]);
    let http = reqwest::Client::new();
    let health: serde_json::Value = http
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let agent = format!("{}/agents/bankingAgent", s.base);
    let turn: serde_json::Value = http
        .post(&agent)
        .json(&serde_json::json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let pending: serde_json::Value = http
        .get(format!("{agent}/pending"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let item = &pending["result"][0];
    assert_eq!(item["tool"], "transferMoney", "{pending}");
    let mut part = item["part"].clone();
    part["metadata"] = serde_json::json!({"resumed": {"approved": true}});
    let done: serde_json::Value = http
        .post(&agent)
        .json(&serde_json::json!({"data": {"resume": {"restart": [part]}}, "init": {"snapshotId": item["snapshotId"]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["result"]["finishReason"], "stop", "{done}");
    assert!(done.to_string().contains("Done: txn-123"), "{done}");
}

#[test]
fn serve_on_a_busy_port_fails_with_one_clear_line() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let (ok, _, err) = banking(&["serve", "--store", "memory:", "--addr", &addr], "");
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("already in use") && err.contains("--addr"), "{err}");
}

#[test]
fn serve_refuses_a_public_address_without_a_key() {
    let (ok, _, err) = banking(&["serve", "--store", "memory:", "--addr", "0.0.0.0:0"], "");
    assert!(!ok);
    assert!(err.contains("--api-key"), "{err}");
}

#[test]
fn chat_defaults_to_a_sqlite_file_in_the_data_directory() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_banking"))
        .args(["chat", "--message", "what is my balance"])
        .env("XDG_DATA_HOME", data.path())
        .env_remove("HOLDPOINT_STORE")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("HOLDPOINT_MODEL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(data.path().join("holdpoint/banking.db").exists());
    // The data directory and the database are the owner's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| format!("{:o}", std::fs::metadata(p).unwrap().permissions().mode() & 0o777);
        assert_eq!(mode(&data.path().join("holdpoint")), "700");
        assert_eq!(mode(&data.path().join("holdpoint/banking.db")), "600");
    }
}

#[test]
fn unreachable_database_fails_with_one_clear_line() {
    let (ok, _, err) = banking(&["chat", "--store", "postgres://nobody@127.0.0.1:1/none"], "");
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("store cannot be opened"), "{err}");
}

#[tokio::test]
async fn serve_guards_metrics_behind_the_key_unless_metrics_open() {
    let key = "k-operator-0123456789abcdef";
    let http = reqwest::Client::new();
    let guarded = serve(&["--store", "memory:", "--api-key", key]);
    let status = |r: reqwest::Response| r.status().as_u16();
    let url = format!("{}/metrics", guarded.base);
    assert_eq!(status(http.get(&url).send().await.unwrap()), 401);
    assert_eq!(
        status(http.get(&url).header("x-api-key", key).send().await.unwrap()),
        200
    );
    let open = serve(&["--store", "memory:", "--api-key", key, "--metrics-open"]);
    let url = format!("{}/metrics", open.base);
    assert_eq!(status(http.get(&url).send().await.unwrap()), 200);
}

/// Two customers and three approvers, a rule for large transfers, and a
/// `listen` the `--addr` flag overrides.
const CONFIG: &str = r#"
[server]
listen = "127.0.0.1:1"
store = "memory:"

[[auth.api_keys]]
principal = "alice"
key = "k-alice-0123456789"
roles = ["customer"]

[[auth.api_keys]]
principal = "bob"
key = "k-bob-0123456789"
roles = ["customer"]

[[auth.api_keys]]
principal = "fiona"
key = "k-fiona-0123456789"
roles = ["finance"]

[[auth.api_keys]]
principal = "frank"
key = "k-frank-0123456789"
roles = ["finance"]

[[auth.api_keys]]
principal = "carol"
key = "k-carol-0123456789"
roles = ["finance", "cfo"]

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount > 10000"
approvers = ["finance"]
quorum = 2
self_approval = false
"#;

const KEYS: [&str; 5] = [
    "k-alice-0123456789",
    "k-bob-0123456789",
    "k-fiona-0123456789",
    "k-frank-0123456789",
    "k-carol-0123456789",
];

#[tokio::test]
async fn serve_with_a_config_file_authenticates_each_key_and_keeps_customers_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.toml");
    std::fs::write(&path, CONFIG).unwrap();
    let s = serve(&["--config", path.to_str().unwrap()]);
    assert!(!s.base.ends_with(":1"), "--addr wins over [server] listen: {}", s.base);
    let http = reqwest::Client::new();
    let get = |path: String, key: Option<&'static str>| {
        let mut r = http.get(format!("{}{path}", s.base));
        if let Some(k) = key {
            r = r.header("x-api-key", k);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap())
        }
    };
    for key in KEYS {
        let (status, body) = get("/agents".into(), Some(key)).await;
        assert_eq!(status, 200, "{key}: {body}");
        assert!(body.to_string().contains("bankingAgent"), "{body}");
    }
    assert_eq!(get("/agents".into(), Some("k-mallory-0123456789")).await.0, 401);
    assert_eq!(
        get("/agents".into(), None).await.0,
        401,
        "no anonymous access with configured keys"
    );

    let agent = format!("{}/agents/bankingAgent", s.base);
    let turn: serde_json::Value = http
        .post(&agent)
        .header("x-api-key", KEYS[0])
        .json(&serde_json::json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let (_, mine) = get("/agents/bankingAgent/pending".into(), Some(KEYS[0])).await;
    assert_eq!(mine["result"].as_array().unwrap().len(), 1, "{mine}");
    let (_, theirs) = get("/agents/bankingAgent/pending".into(), Some(KEYS[1])).await;
    assert_eq!(
        theirs["result"].as_array().unwrap().len(),
        0,
        "bob sees alice's hold: {theirs}"
    );
}

#[test]
fn serve_with_a_bad_config_file_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.toml");
    let bad = CONFIG.replace("approvers = [\"finance\"]", "approvers = [\"finanse\"]");
    std::fs::write(&path, &bad).unwrap();
    let line = bad.lines().position(|l| l.contains("finanse")).unwrap() + 1;
    let (ok, _, err) = banking(&["serve", "--config", path.to_str().unwrap()], "");
    assert!(!ok);
    let at = format!("{}:{line}:", path.display());
    assert!(err.contains(&at), "{err}");
    assert!(
        err.contains("`approval.rules[0].approvers[0]`: role \"finanse\" is not declared"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    for key in KEYS {
        assert!(!err.contains(key), "{err}");
    }
}

/// The `--config` file's `[server] store` is the chat's store unless
/// `--store` is given (a flag wins over the file); a bad or unreachable one
/// is one line naming the file, the line and the key, never the URL.
#[test]
fn config_store_is_used_unless_store_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("from-file.db");
    let path = dir.path().join("holdpoint.toml");
    let write = |store: &str| std::fs::write(&path, format!("[server]\nstore = {store:?}\n")).unwrap();
    let chat = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_banking"))
            .args([
                "chat",
                "--config",
                path.to_str().unwrap(),
                "--message",
                "what is my balance",
            ])
            .args(extra)
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env_remove("HOLDPOINT_STORE")
            .env_remove("HOLDPOINT_MODEL")
            .env_remove("GEMINI_API_KEY")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    write(&format!("sqlite:{}", db.display()));
    let (ok, err) = chat(&["--store", "memory:"]);
    assert!(ok, "{err}");
    assert!(!db.exists(), "--store wins over the file");
    let (ok, err) = chat(&[]);
    assert!(ok, "{err}");
    assert!(db.exists(), "the file's store is used");
    assert!(!dir.path().join("data/holdpoint").exists(), "the default is not made");

    let at = format!("{}:2:9: `server.store`: ", path.display());
    write("redis://user:pw-9035@host");
    let (ok, err) = chat(&[]);
    assert!(
        !ok && err.contains(&at) && err.contains("unsupported store URL"),
        "{err}"
    );
    assert!(!err.contains("pw-9035") && err.trim().lines().count() == 1, "{err}");
    write("postgres://nobody:pw-9035@127.0.0.1:1/none");
    let (ok, err) = chat(&[]);
    assert!(!ok && err.contains(&format!("{at}store cannot be opened")), "{err}");
    assert!(!err.contains("pw-9035") && err.trim().lines().count() == 1, "{err}");
}

/// A rule's expiry acts with no `[notify]` channel in the file: the hold is
/// denied on time (nobody answers it) with the tool's own deny data, and
/// the audit log records it as expired. Before, the notification worker
/// (which fires timers) started only with a channel, so such a hold waited
/// forever; and the expiry's denial was `{toolApproved: false}`, which a
/// typed resumable tool (`transferMoney`'s `{approved}`) cannot decode, so
/// it failed and was retried until dead.
#[tokio::test]
async fn a_rule_expiry_denies_an_unanswered_hold_with_no_notify_channel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.toml");
    let config = r#"
[[auth.api_keys]]
principal = "alice"
key = "k-alice-0123456789"
roles = ["customer"]

[[auth.api_keys]]
principal = "fiona"
key = "k-fiona-0123456789"
roles = ["finance"]

[[auth.api_keys]]
principal = "olga"
key = "k-olga-0123456789"
roles = ["operator"]

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
approvers = ["finance"]
self_approval = false
expire_after = "2s"
on_expire = "deny"
"#;
    std::fs::write(&path, config).unwrap();
    let s = serve(&["--config", path.to_str().unwrap()]);
    let http = reqwest::Client::new();
    let key = "k-alice-0123456789";
    let turn: serde_json::Value = http
        .post(format!("{}/agents/bankingAgent", s.base))
        .header("x-api-key", key)
        .json(&serde_json::json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let session = turn["result"]["sessionId"].as_str().unwrap().to_owned();
    let audit = || async {
        let body: serde_json::Value = http
            .get(format!("{}/agents/bankingAgent/audit?sessionId={session}", s.base))
            .header("x-api-key", key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["result"].as_array().cloned().unwrap_or_else(|| panic!("{body}"))
    };
    // The timer is due 2 s after the hold; the worker polls twice a second.
    let mut rows = audit().await;
    for _ in 0..120 {
        if !rows.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        rows = audit().await;
    }
    assert_eq!(rows.len(), 1, "the expiry decided the hold once: {rows:#?}");
    assert_eq!(rows[0]["decision"], "expire", "{rows:#?}");
    assert_eq!(rows[0]["tool"], "transferMoney", "{rows:#?}");
    assert_eq!(
        rows[0]["actor"], "holdpoint:expiry",
        "the timer acted, not the owner: {rows:#?}"
    );
    // No channel: the store wrote only the timers that act, no event
    // nobody would read (the operator's view of the outbox).
    let listed: serde_json::Value = http
        .get(format!("{}/notifications", s.base))
        .header("x-api-key", "k-olga-0123456789")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = listed["result"]["notifications"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|n| n["type"].as_str())
        .collect();
    assert!(kinds.contains(&"hold.expired"), "{listed}");
    assert!(
        kinds
            .iter()
            .all(|k| ["hold.expired", "hold.escalated", "hold.in_doubt"].contains(k)),
        "{listed}"
    );

    // The same rule on the hold supportAgent's sub-agent surfaces: the
    // expiry answers it on the root, routed down; the model is told.
    let turn: serde_json::Value = http
        .post(format!("{}/agents/supportAgent", s.base))
        .header("x-api-key", key)
        .json(&serde_json::json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let session = turn["result"]["sessionId"].as_str().unwrap().to_owned();
    let last_words = || async {
        let body: serde_json::Value = http
            .post(format!("{}/agents/supportAgent/getSnapshot", s.base))
            .header("x-api-key", key)
            .json(&serde_json::json!({"data": {"sessionId": session}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let messages = body["result"]["state"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        messages.last().map(|m| m["content"].to_string()).unwrap_or_default()
    };
    let mut words = last_words().await;
    for _ in 0..120 {
        if words.contains("expired") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        words = last_words().await;
    }
    assert!(words.contains("approval expired"), "{words}");
    for agent in ["bankingAgent", "supportAgent"] {
        let pending: serde_json::Value = http
            .get(format!("{}/agents/{agent}/pending", s.base))
            .header("x-api-key", "k-fiona-0123456789")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(pending["result"].as_array().unwrap().len(), 0, "{agent}: {pending}");
    }
}

/// A rule's escalation on the hold supportAgent's sub-agent surfaces, with
/// no `[notify]` channel: before it fires the added role neither sees nor
/// may answer the hold; after, it is in that approver's inbox and their
/// approval runs the transfer (the role was added on the root, where the
/// hold is listed, and on the child's session, where the answer is checked
/// again).
#[tokio::test]
async fn a_rule_escalation_lets_the_added_role_answer_a_sub_agents_hold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.toml");
    let config = r#"
[[auth.api_keys]]
principal = "alice"
key = "k-alice-0123456789"
roles = ["customer"]

[[auth.api_keys]]
principal = "fiona"
key = "k-fiona-0123456789"
roles = ["finance"]

[[auth.api_keys]]
principal = "carol"
key = "k-carol-0123456789"
roles = ["cfo"]

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
approvers = ["finance"]
escalate_after = "3s"
escalate_to = ["cfo"]
"#;
    std::fs::write(&path, config).unwrap();
    let s = serve(&["--config", path.to_str().unwrap()]);
    let http = reqwest::Client::new();
    let carol = "k-carol-0123456789";
    let turn: serde_json::Value = http
        .post(format!("{}/agents/supportAgent", s.base))
        .header("x-api-key", "k-alice-0123456789")
        .json(&serde_json::json!({"data": {"message": {"role": "user", "content": [{"text": "Transfer $500 to savings"}]}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["result"]["finishReason"], "interrupted", "{turn}");
    let inbox = || async {
        let body: serde_json::Value = http
            .get(format!("{}/inbox", s.base))
            .header("x-api-key", carol)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["result"]["items"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{body}"))
    };
    let answer = |snapshot: String, reference: String| {
        http.post(format!("{}/agents/supportAgent/answer", s.base))
            .header("x-api-key", carol)
            .json(&serde_json::json!({"data": {"snapshotId": snapshot, "ref": reference, "decision": "approve"}}))
            .send()
    };
    let snapshot = turn["result"]["snapshotId"].as_str().unwrap().to_owned();
    assert!(inbox().await.is_empty(), "carol sees the hold before it is escalated");
    let early = answer(snapshot, "any".into()).await.unwrap();
    assert!(early.status().is_client_error(), "{}", early.status());
    let mut items = inbox().await;
    for _ in 0..120 {
        if !items.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        items = inbox().await;
    }
    assert_eq!(items.len(), 1, "{items:#?}");
    assert_eq!(items[0]["tool"], "transferMoney", "{items:#?}");
    let reference = items[0]["ref"].as_str().unwrap().to_owned();
    assert!(reference.contains('/'), "a surfaced hold's compound ref: {reference}");
    let snapshot = items[0]["snapshotId"].as_str().unwrap().to_owned();
    let done = answer(snapshot, reference).await.unwrap();
    let status = done.status();
    let body: serde_json::Value = done.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["decided"], true, "{body}");
    assert!(body.to_string().contains("txn-"), "the transfer ran: {body}");
}
