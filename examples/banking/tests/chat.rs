//! `banking chat` of issue 33 item 8, driven as a user would (answers piped
//! on stdin): edit the amount then approve, the JSON answer explained,
//! `--session ID` continuing a stored session after the process ended.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};

use holdpoint::message::Role;

fn banking(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_banking"))
        .args(args)
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("HOLDPOINT_MODEL")
        .env_remove("HOLDPOINT_CONFIG")
        .env_remove("HOLDPOINT_STORE")
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

/// The session id the chat prints on its first line.
fn session_of(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|l| l.split_whitespace().next())
        .expect(out)
        .to_owned()
}

/// The executed transfers of a stored session: `transferMoney` responses
/// that moved money.
async fn transfers_made(url: &str, session: &str) -> Vec<serde_json::Value> {
    let store = holdpoint_stores::open_store(url).await.unwrap();
    let snapshot = store.get_latest_snapshot(session).await.unwrap().unwrap();
    let state = snapshot.state.unwrap();
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter().filter_map(|p| p.as_tool_response()))
        .filter(|r| r.name == "transferMoney")
        .filter_map(|r| r.output.clone())
        .filter(|o| o["success"] == true)
        .collect()
}

/// `e`, then a new amount: the transfer restarts with it, approved, and
/// runs once with the new amount; an amount the tool refuses is asked
/// again first.
#[tokio::test]
async fn chat_edits_the_amount_then_approves() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("chat.db").display());
    let (ok, out, err) = banking(
        &["chat", "--store", &url, "--message", "Transfer $500 to savings"],
        "e\n1m\n400\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("e AMOUNT = edit the amount then approve"),
        "offered: {out}"
    );
    let refused = out.find("at most 100000 dollars").expect(&out);
    let edited = out
        .find("✎ edited: $400.00 to savings instead of $500.00, and approved")
        .expect(&out);
    let done = out.find("assistant> Done: txn-123").expect(&out);
    assert!(refused < edited && edited < done, "{out}");
    assert!(out.contains("the edited call ran with the new input"), "{out}");
    let made = transfers_made(&url, &session_of(&out)).await;
    assert_eq!(made.len(), 1, "{made:?}");

    // `edit AMOUNT` on one line, with the people's way of writing it.
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "Transfer $500 to savings"],
        "edit $1,250.50\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("✎ edited: $1250.50 to savings instead of $500.00"),
        "{out}"
    );
    assert!(out.contains("assistant> Done: txn-123"), "{out}");
}

/// Under an approval rule the edited transfer is held again for the
/// rule's approvers: the chat says so, and claims no success.
#[test]
fn chat_says_an_edit_under_a_rule_is_held_again_for_its_approvers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(
        &config,
        r#"
[[auth.api_keys]]
principal = "fiona"
key = "k-fiona-0123456789"
roles = ["finance"]

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
when = "input.amount > 10000"
approvers = ["finance"]
quorum = 2
self_approval = false
"#,
    )
    .unwrap();
    let url = format!("sqlite:{}", dir.path().join("chat.db").display());
    let (ok, out, err) = banking(
        &[
            "chat",
            "--store",
            &url,
            "--config",
            config.to_str().unwrap(),
            "--message",
            "Transfer $500 to savings",
        ],
        "edit 20000\ny\n",
    );
    assert!(ok, "{out}\n{err}");
    let edited = out.find("✎ edited: $20000.00").expect(&out);
    let again = out.find("the edited call is held again").expect(&out);
    assert!(edited < again, "{out}");
    assert!(out[again..].contains("2 of finance"), "names the approvers: {out}");
    assert!(
        out.contains("Transfer $20000.00 to savings"),
        "asks about the revised call: {out}"
    );
    assert!(!out.contains("Done: txn-123"), "no success claimed: {out}");
    assert!(!out.contains("ran with the new input"), "{out}");
    assert!(out.contains("keeps it paused"), "{out}");
}

/// A call that only takes a JSON answer says what the JSON does.
#[test]
fn chat_explains_the_json_answer() {
    let (ok, out, err) = banking(
        &["chat", "--store", "memory:", "--message", "Transfer $500 to savings"],
        "{\"success\": true, \"transactionId\": \"manual-1\"}\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("JSON = respond: the tool does not run; this JSON is its result"),
        "{out}"
    );
    assert!(
        out.contains("the tool does not run; the model gets this JSON as its result"),
        "{out}"
    );
    assert!(out.contains("Done: manual-1"), "{out}");
}

/// Two transfers in one message are two paused calls, each answered.
#[test]
fn chat_asks_about_each_of_two_transfers_in_one_message() {
    let (ok, out, err) = banking(
        &[
            "chat",
            "--store",
            "memory:",
            "--message",
            "transfer $5 to savings and $7 to checking",
        ],
        "y\nn not today\n",
    );
    assert!(ok, "{out}\n{err}");
    let first = out.find("approval needed: Transfer $5.00 to savings").expect(&out);
    let second = out.find("approval needed: Transfer $7.00 to checking").expect(&out);
    assert!(first < second, "{out}");
    assert!(out.contains("Done: txn-123"), "{out}");
    assert!(
        out.contains("not made (the account holder declined the transfer: not today)"),
        "{out}"
    );
}

/// The chat pauses on a SQLite file and exits with the call waiting;
/// `--session ID` shows the waiting call, and approving it finishes the
/// transfer, once.
#[tokio::test]
async fn chat_session_continues_a_stored_session_with_its_waiting_call() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("chat.db").display());
    let (ok, out, err) = banking(&["chat", "--store", &url, "--message", "Transfer $500 to savings"], "");
    assert!(ok, "{out}\n{err}");
    let session = session_of(&out);
    assert!(out.contains(&format!("banking chat --session {session}")), "{out}");
    assert!(transfers_made(&url, &session).await.is_empty());

    let (ok, out, err) = banking(&["chat", "--store", &url, "--session", &session], "y\n");
    assert!(ok, "{out}\n{err}");
    assert!(out.starts_with(&format!("session {session} continued")), "{out}");
    let waiting = out.find("1 call(s) left waiting").expect(&out);
    let asked = out.find("approval needed: Transfer $500.00 to savings").expect(&out);
    let done = out.find("assistant> Done: txn-123").expect(&out);
    assert!(waiting < asked && asked < done, "{out}");
    assert_eq!(transfers_made(&url, &session).await.len(), 1);

    // Once more: nothing waits, nothing runs again; the chat goes on.
    let (ok, out, err) = banking(
        &["chat", "--store", &url, "--session", &session],
        "what is my savings balance\n",
    );
    assert!(ok, "{out}\n{err}");
    assert!(!out.contains("left waiting"), "{out}");
    assert!(out.contains("assistant> Your savings balance is $5400.00."), "{out}");
    assert_eq!(transfers_made(&url, &session).await.len(), 1);

    let (ok, _, err) = banking(&["chat", "--store", &url, "--session", "no-such-session"], "");
    assert!(!ok);
    assert!(err.contains("session no-such-session not found"), "{err}");
}
