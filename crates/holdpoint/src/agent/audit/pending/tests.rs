use crate::message::metadata;
use serde_json::json;

use super::*;

struct At<'a>(&'a PendingApproval, DateTime<Utc>);

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.write_at(f, self.1)
    }
}

fn transfer() -> PendingApproval {
    let held = DateTime::parse_from_rfc3339("2026-01-02T15:04:05Z").unwrap().to_utc();
    let mut part = Part::tool_request("transferMoney", Some("0".into()), Some(json!({"amount": 500})));
    part.set_meta(metadata::INTERRUPT, json!({"details": "Transfer $500.00 to savings"}));
    PendingApproval {
        agent: Some("bankingAgent".into()),
        session_id: "s-1".into(),
        snapshot_id: "p-1".into(),
        owner: None,
        tool: "transferMoney".into(),
        reference: Some("0".into()),
        input: json!({"amount": 500}),
        interrupt: part.interrupt_data().unwrap(),
        interrupted_by: None,
        held_since: held,
        expires_at: None,
        expired: false,
        part,
        in_doubt: false,
        decided: Vec::new(),
        path: Vec::new(),
        rule: None,
        approvals: Vec::new(),
        reply: None,
        preview: None,
        unapprovable: None,
    }
}

#[test]
fn display_names_the_call_what_it_asks_where_it_waits_and_since_when() {
    let p = transfer();
    let now = p.held_since + chrono::TimeDelta::seconds(192);
    assert_eq!(
        At(&p, now).to_string(),
        r#"transferMoney {"amount":500} asks {"details":"Transfer $500.00 to savings"} (held by the tool) — session s-1, snapshot p-1, ref 0, waiting 3m 12s"#
    );
    let held = PendingApproval {
        interrupted_by: Some("toolApproval".into()),
        owner: Some("alice".into()),
        expires_at: Some(p.held_since + chrono::TimeDelta::hours(24)),
        ..transfer()
    };
    let later = p.held_since + chrono::TimeDelta::hours(2);
    let text = At(&held, later).to_string();
    assert!(text.contains("(held by toolApproval)"), "{text}");
    assert!(
        text.ends_with(", owner alice, waiting 2h 0m, expires in 22h 0m"),
        "{text}"
    );
    let gone = PendingApproval {
        expired: true,
        in_doubt: true,
        ..held
    };
    assert!(
        At(&gone, later)
            .to_string()
            .ends_with("waiting 2h 0m, expired, in doubt")
    );
}

#[test]
fn ages_read_in_the_largest_units() {
    let s = chrono::TimeDelta::seconds;
    assert_eq!(age(s(-5)), "0s");
    assert_eq!(age(s(59)), "59s");
    assert_eq!(age(s(3599)), "59m 59s");
    assert_eq!(age(s(86_399)), "23h 59m");
    assert_eq!(age(s(2 * 86_400 + 3 * 3600)), "2d 3h");
}
