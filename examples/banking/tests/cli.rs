//! The `banking` binary, driven as a user would: answers piped on stdin.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};

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
