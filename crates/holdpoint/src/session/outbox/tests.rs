//! Unit tests of the outbox rows.

use std::time::Duration;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::*;
use crate::message::metadata;
use crate::message::{Message, Part, Role};
use crate::model::FinishReason;
use crate::session::snapshot::Snapshot;
use crate::session::{AuditDecision, AuditRecord, SessionState};

fn held(interrupt: Value) -> Snapshot {
    let mut paused = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 50000})));
    paused.set_meta(metadata::INTERRUPT, interrupt);
    let mut state = SessionState::new("s1");
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![paused])];
    let mut row = Snapshot::new(state);
    row.snapshot_id = "snap".into();
    row.agent = Some("bank".into());
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

#[test]
fn a_waiting_row_makes_one_created_event_per_call_and_its_timers() {
    let mut data = Map::new();
    data.insert(APPROVERS.into(), json!(["finance"]));
    let timers = HoldTimers {
        remind_after: Some(Duration::from_secs(60)),
        escalate_after: Some(Duration::from_secs(120)),
        escalate_to: vec!["cfo".into()],
        expire_after: Some(Duration::from_secs(180)),
        on_expire: OnExpire::Deny,
    };
    let now = Utc::now();
    timers.stamp(&mut data, now);
    let events = hold_events(false, &held(Value::Object(data)));
    let kinds: Vec<_> = events.iter().map(|e| (e.kind.as_str(), e.timer)).collect();
    assert_eq!(
        kinds,
        [
            (HOLD_CREATED, false),
            (HOLD_REMINDED, true),
            (HOLD_ESCALATED, true),
            (HOLD_EXPIRED, true)
        ]
    );
    assert_eq!(events[0].data["tool"], "transferMoney");
    assert_eq!(events[0].data["input"]["amount"], 50000);
    assert_eq!(events[0].data["approvers"], json!(["finance"]));
    // The reminder goes to the same approvers as the first notice.
    assert_eq!(events[1].data["approvers"], events[0].data["approvers"]);
    assert_eq!(events[2].data["approvers"], json!(["finance", "cfo"]));
    assert_eq!(events[3].data[ON_EXPIRE], "deny");
    assert!(events[3].due_at > now + chrono::Duration::seconds(170));
    // A save that leaves a waiting row waiting, or of a row that does
    // not wait, writes nothing.
    assert!(hold_events(true, &held(json!(true))).is_empty());
    let mut done = held(json!(true));
    done.finish_reason = Some(FinishReason::Stop);
    assert!(hold_events(false, &done).is_empty());
}

fn record() -> AuditRecord {
    AuditRecord {
        id: "a1".into(),
        at: Utc::now(),
        principal: Some("bob".into()),
        actor: Some("bob".into()),
        agent: Some("bank".into()),
        session_id: "s1".into(),
        snapshot_id: "snap".into(),
        tool: "transferMoney".into(),
        reference: Some("r1".into()),
        input_hash: String::new(),
        input: None,
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Approve,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    }
}

#[test]
fn a_claim_makes_decided_events_and_an_in_doubt_timer() {
    let record = record();
    let lease = Utc::now() + chrono::Duration::seconds(60);
    let events = decided_events("snap", lease, &[record]);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].kind, HOLD_DECIDED);
    assert_eq!(events[0].data["decisions"][0]["decision"], "approve");
    assert_eq!(events[1].kind, HOLD_IN_DOUBT);
    assert!(events[1].timer);
    assert_eq!(events[1].due_at, lease);
    assert!(decided_events("snap", lease, &[]).is_empty());
}

#[test]
fn outcomes_move_rows() {
    let mut e = OutboxEvent::new(HOLD_CREATED, "s", "x", None, json!({}), Utc::now());
    e.attempts = 1;
    apply_outcome(
        &mut e,
        OutboxOutcome::Retry {
            due_at: Utc::now(),
            error: None,
            done: vec![],
            counted: false,
        },
    );
    assert_eq!((e.state, e.attempts), (OutboxState::Pending, 0));
    apply_outcome(
        &mut e,
        OutboxOutcome::Dead {
            error: "x".into(),
            done: vec!["a".into()],
        },
    );
    assert_eq!(e.state, OutboxState::Dead);
    assert!(apply_retry(&mut e, Utc::now(), &[]).is_empty());
    assert!(e.claimable(Utc::now()));
    assert_eq!(e.done, ["a"]);
    // A retry re-enables the stopped endpoints the row skipped, and sends
    // to them again.
    e.done = vec!["a".into(), "webhook:0".into()];
    let enabled = apply_retry(&mut e, Utc::now(), &["webhook:0".into(), "slack:0".into()]);
    assert_eq!(enabled, ["webhook:0"]);
    assert_eq!(e.done, ["a"]);
}

#[test]
fn an_escalation_adds_its_roles_to_the_hold_once() {
    let mut row = held(json!({"approvers": ["finance"]}));
    if let Some(part) = row
        .state
        .as_mut()
        .and_then(|s| s.messages.last_mut())
        .and_then(|m| m.content.first_mut())
    {
        part.set_meta(
            metadata::APPROVAL_RULE,
            json!({"rule": "big", "approvers": ["finance"], "quorum": 1, "selfApproval": false}),
        );
    }
    let roles = vec!["cfo".to_owned()];
    let next = escalated_hold(&row, Some("r1"), "transferMoney", &roles).expect("changed");
    let part = &next.state.as_ref().unwrap().messages.last().unwrap().content[0];
    assert_eq!(
        part.meta(metadata::APPROVAL_RULE).unwrap()["approvers"],
        json!(["finance", "cfo"])
    );
    let data = part.interrupt_data().unwrap();
    assert_eq!(data[APPROVERS], json!(["finance", "cfo"]));
    assert_eq!(data[ESCALATED_TO], json!(["cfo"]));
    // Firing again changes nothing; another call, or a row that does not
    // wait, is not touched.
    assert!(escalated_hold(&next, Some("r1"), "transferMoney", &roles).is_none());
    assert!(escalated_hold(&row, Some("r2"), "transferMoney", &roles).is_none());
    let mut done = row.clone();
    done.finish_reason = Some(FinishReason::Stop);
    assert!(escalated_hold(&done, Some("r1"), "transferMoney", &roles).is_none());
}

/// A root's paused call that surfaces a sub-agent's holds (two levels
/// down) is told as the innermost call, on the root's row under the
/// compound ref, with that call's approvers and timers; the sub-agents'
/// own waiting rows tell nothing (their holds are answered at the root).
#[test]
fn a_surfaced_hold_is_told_as_its_nested_call_on_the_root_only() {
    let mut leaf = Part::tool_request("transferMoney", Some("t1".into()), Some(json!({"amount": 500})));
    leaf.set_meta(
        metadata::INTERRUPT,
        json!({APPROVERS: ["finance"], "expiresAt": "2999-01-01T00:00:00Z"}),
    );
    let surface = |name: &str, reference: &str, inner: &Part| {
        let mut part = Part::tool_request(name, Some(reference.into()), Some(json!({"input": "pay"})));
        part.set_meta(
            metadata::INTERRUPT,
            json!({"subagent": {"agent": name, "sessionId": "c", "snapshotId": "c-1", "interrupts": [inner]}}),
        );
        part
    };
    let middle = surface("bankingAgent", "b1", &leaf);
    let top = surface("deskAgent", "d1", &middle);
    let mut root = held(json!(true));
    if let Some(state) = root.state.as_mut() {
        state.messages[1] = Message::new(Role::Model, vec![top]);
    }
    let events = hold_events(false, &root);
    let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, [HOLD_CREATED, HOLD_EXPIRED], "{events:#?}");
    let told = &events[0].data;
    assert_eq!(told["tool"], "transferMoney");
    assert_eq!(told["ref"], "d1/b1/t1");
    assert_eq!(told["input"]["amount"], 500);
    assert_eq!(told["approvers"], json!(["finance"]));
    assert_eq!(told["snapshotId"], "snap");
    assert_eq!(events[0].snapshot_id, "snap");

    // The child's own waiting row, linked to its parent's call.
    let mut child = held(json!({APPROVERS: ["finance"]}));
    if let Some(state) = child.state.as_mut() {
        let mut meta = Map::new();
        meta.insert(
            metadata::SUBAGENT_OF.into(),
            json!({"agent": "deskAgent", "sessionId": "p"}),
        );
        state.messages[0].metadata = Some(meta);
    }
    assert!(hold_events(false, &child).is_empty(), "a sub-agent's row tells nothing");
    // A background task's holds are its own: told on its row.
    if let Some(state) = child.state.as_mut()
        && let Some(meta) = state.messages[0].metadata.as_mut()
    {
        meta.insert(
            metadata::SUBAGENT_OF.into(),
            json!({"agent": "deskAgent", "sessionId": "p", "background": true}),
        );
    }
    assert_eq!(hold_events(false, &child).len(), 1);
    assert_rebuilds(&root);
    assert_rebuilds(&child);
}

/// The stubs of `row`'s hold name the rows `hold_events` writes, in order,
/// and each payload built again from the row is the one written.
fn assert_rebuilds(row: &Snapshot) {
    let events = hold_events(false, row);
    let stubs = hold_stubs(false, row);
    assert_eq!(events.len(), stubs.len());
    for (event, (kind, call, due)) in events.iter().zip(&stubs) {
        assert_eq!(event.kind, *kind);
        assert_eq!(event.timer, *kind != HOLD_CREATED);
        if event.timer {
            assert_eq!(event.due_at, *due);
        }
        assert_eq!(call_payload(kind, row, *call).as_ref(), Some(&event.data), "{kind}");
    }
}

#[test]
fn a_hold_payload_is_built_again_from_its_row() {
    let mut data = Map::new();
    data.insert(APPROVERS.into(), json!(["finance"]));
    let timers = HoldTimers {
        remind_after: Some(Duration::from_secs(60)),
        escalate_after: Some(Duration::from_secs(120)),
        escalate_to: vec!["cfo".into()],
        expire_after: Some(Duration::from_secs(180)),
        on_expire: OnExpire::Deny,
    };
    timers.stamp(&mut data, Utc::now());
    let mut row = held(Value::Object(data));
    assert_rebuilds(&row);
    // A claim since changes nothing the payload reads.
    let stubs = hold_stubs(false, &row);
    let before = call_payload(HOLD_CREATED, &row, stubs[0].1);
    row.resumed_at = Some(Utc::now());
    assert_eq!(call_payload(HOLD_CREATED, &row, stubs[0].1), before);
    assert_eq!(call_payload(HOLD_CREATED, &row, 7), None, "no such call");
    assert_rebuilds(&held(json!(true)));
}

#[test]
fn a_claim_payload_is_built_again_from_its_records() {
    let mut second = record();
    second.reference = Some("r2".into());
    second.decision = AuditDecision::Deny;
    let records = [record(), second];
    let events = decided_events("snap", Utc::now(), &records);
    assert_eq!(events.len(), 3);
    for (i, event) in events[..2].iter().enumerate() {
        assert_eq!(
            decision_payload("snap", &records, Decisions::One(i)).as_ref(),
            Some(&event.data)
        );
    }
    assert_eq!(
        decision_payload("snap", &records, Decisions::All).as_ref(),
        Some(&events[2].data)
    );
    assert_eq!(events[2].data["decisions"][1]["decision"], "deny");
    assert_eq!(decision_payload("snap", &records, Decisions::One(2)), None);
}

#[test]
fn without_a_channel_only_acting_timers_are_written() {
    let all = OutboxWrites::default();
    let timers = OutboxWrites::Timers;
    for kind in EVENT_TYPES {
        assert!(all.writes(kind));
    }
    let kept: Vec<_> = EVENT_TYPES.iter().filter(|k| timers.writes(k)).collect();
    assert_eq!(kept, [&HOLD_ESCALATED, &HOLD_EXPIRED, &HOLD_IN_DOUBT]);
    assert!(all.tells() && !timers.tells());
}

/// Every `pub const HOLD_…` event name of this module is in [`EVENT_TYPES`]
/// once: the list channels are configured against (the server's config
/// validator and the notifier use it) cannot miss an event the outbox
/// writes.
#[test]
fn every_event_constant_is_listed_in_event_types() {
    let source = include_str!("mod.rs");
    let declared: Vec<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("pub const HOLD_"))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    assert!(declared.len() >= 7, "{declared:?}");
    for name in &declared {
        assert_eq!(
            EVENT_TYPES.iter().filter(|e| *e == name).count(),
            1,
            "{name} is not listed in EVENT_TYPES exactly once"
        );
    }
    assert_eq!(EVENT_TYPES.len(), declared.len(), "{EVENT_TYPES:?} vs {declared:?}");
}
