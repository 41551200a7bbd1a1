//! The audit table's input column.

use super::show::audited_input;
use holdpoint::session::AuditRecord;
use holdpoint::session::{AuditDecision, hash_json};
use serde_json::json;

#[test]
fn the_audit_input_column_shows_a_replaced_input_and_the_original_hash() {
    let (held, ran) = (
        json!({"amount": 500}),
        json!({"amount": 999999, "toAccount": "mallory"}),
    );
    let mut r = AuditRecord {
        id: "a".into(),
        at: chrono::Utc::now(),
        principal: None,
        actor: None,
        agent: None,
        session_id: "s".into(),
        snapshot_id: "p".into(),
        tool: "transferMoney".into(),
        reference: None,
        input_hash: hash_json(&held),
        input: None,
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Approve,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    };
    assert_eq!(audited_input(&r), hash_json(&held)[..12]);
    r.input_hash = hash_json(&ran);
    r.input = Some(ran.clone());
    r.original_input = Some(held.clone());
    r.original_input_hash = Some(hash_json(&held));
    let shown = audited_input(&r);
    assert!(shown.starts_with(&hash_json(&ran)[..12]), "{shown}");
    assert!(shown.contains("mallory"), "{shown}");
    assert!(
        shown.ends_with(&format!("(replaced {})", &hash_json(&held)[..12])),
        "{shown}"
    );
}
