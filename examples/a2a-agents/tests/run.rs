//! The example as its README runs it: approve, then `--deny`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

fn run(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-agents"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn approving_at_the_front_desk_runs_the_banks_transfer_once() {
    let out = run(&[]);
    assert!(out.contains("held at the front desk"), "{out}");
    assert!(
        out.contains("\"tool\":\"transferMoney\""),
        "the bank's hold crossed: {out}"
    );
    assert!(out.contains(r#"\"transferred\":200"#), "{out}");
    assert!(out.contains("transfers the bank made: 1"), "{out}");
}

#[test]
fn denying_at_the_front_desk_cancels_the_banks_task() {
    let out = run(&["--deny"]);
    assert!(out.contains("not this account"), "{out}");
    assert!(out.contains("was canceled"), "{out}");
    assert!(out.contains("transfers the bank made: 0"), "{out}");
}
