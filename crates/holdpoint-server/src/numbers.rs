//! JSON numbers as JavaScript clients send them back.
//!
//! A tool input like `{"amount": 500.0}` reaches a browser as `500.0`,
//! which `JSON.parse` turns into the number 500 and `JSON.stringify` writes
//! as `500`. The core compares a restart's input with the paused call's
//! input exactly, and `500` (an integer) is not `500.0` (a float) to
//! `serde_json`, so an untouched input would read as "modified". At the
//! HTTP edge, before the agent sees a resume, each restart's `input` (and
//! `replacedInput`) that is numerically equal to the paused call's input is
//! replaced by the stored original. Anything that really differs is left
//! alone for the core's strict validation to refuse.

use chrono::{DateTime, Utc};
use holdpoint::agent::{Agent, AgentInit, AgentInput};
use holdpoint::message::metadata::REPLACED_INPUT;
use holdpoint::session::Snapshot;
use holdpoint::{Message, Part, Role};
use serde_json::Value;

/// Equal as JSON values, numbers compared by value (`500 == 500.0`).
pub(crate) fn numerically_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.as_f64() == y.as_f64()
            } else {
                x == y
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| numerically_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| numerically_equal(v, w)))
        }
        _ => a == b,
    }
}

fn restore(slot: &mut Value, original: &Value) {
    if slot != original && numerically_equal(slot, original) {
        *slot = original.clone();
    }
}

/// Puts the paused calls' exact inputs into restarts that carry them in
/// another number form.
pub(crate) fn restore_inputs(restart: &mut [Part], history: &[Message]) {
    let Some(pending) = history.iter().rev().find(|m| m.role == Role::Model) else {
        return;
    };
    for directive in restart {
        let Some(req) = directive.as_tool_request() else {
            continue;
        };
        let (name, reference) = (req.name.clone(), req.reference.clone());
        let Some(original) = pending
            .content
            .iter()
            .filter_map(Part::as_tool_request)
            .find(|r| r.name == name && r.reference == reference)
            .and_then(|r| r.input.clone())
        else {
            continue;
        };
        if let Some(replaced) = directive.meta(REPLACED_INPUT).cloned() {
            let mut fixed = replaced.clone();
            restore(&mut fixed, &original);
            if fixed != replaced {
                directive.set_meta(REPLACED_INPUT, fixed);
            }
            continue;
        }
        if let Some(r) = directive.as_tool_request_mut()
            && let Some(input) = r.input.as_mut()
        {
            restore(input, &original);
        }
    }
}

/// The stored snapshot `init` names, as `principal` may see it: exactly
/// the one the agent's own load would read for this init (so it can be
/// handed over instead of read again), or `None` (nothing stored is named,
/// client-held state, or the read failed: the agent's load reads and
/// reports then).
async fn stored_for(agent: &Agent, init: &AgentInit, principal: Option<&str>) -> Option<Snapshot> {
    if init.state.is_some() {
        return None;
    }
    match (&init.snapshot_id, &init.session_id) {
        (Some(id), session) => agent
            .snapshot_as(id, principal)
            .await
            .ok()
            .flatten()
            .filter(|s| session.as_ref().is_none_or(|sid| *sid == s.session_id)),
        (None, Some(session)) => agent.latest_snapshot_as(session, principal).await.ok().flatten(),
        (None, None) => None,
    }
}

/// What [`restore_resume_inputs`] read: the stored snapshot the resume
/// answers (to hand to the agent, see `Agent::run_loaded`), and since when
/// its calls have been held (for the approval-wait metric).
#[derive(Default)]
pub(crate) struct ResumeRead {
    pub snapshot: Option<Snapshot>,
    pub held_since: Option<DateTime<Utc>>,
}

/// [`restore_inputs`] for an input about to run with `init`, against the
/// history the resume will be checked against: the snapshot or session
/// `init` names, or the client-held state. Reads nothing for an input
/// without a resume.
pub(crate) async fn restore_resume_inputs(
    agent: &Agent,
    init: &AgentInit,
    principal: Option<&str>,
    input: &mut AgentInput,
) -> ResumeRead {
    let Some(resume) = input.resume.as_mut().filter(|r| !r.is_empty()) else {
        return ResumeRead::default();
    };
    if let Some(snapshot) = stored_for(agent, init, principal).await {
        if let Some(state) = &snapshot.state {
            restore_inputs(&mut resume.restart, &state.messages);
        }
        return ResumeRead {
            held_since: Some(snapshot.created_at),
            snapshot: Some(snapshot),
        };
    }
    // Client-held state: only read here; the agent verifies its signature.
    let messages: Vec<Message> = init
        .state
        .as_ref()
        .and_then(|s| s.get("messages"))
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default();
    restore_inputs(&mut resume.restart, &messages);
    ResumeRead::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(numerically_equal(&json!({"a": [500.0, 1]}), &json!({"a": [500, 1.0]})));
        assert!(!numerically_equal(&json!({"a": 500.5}), &json!({"a": 500})));
        assert!(!numerically_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!numerically_equal(&json!("1"), &json!(1)));
    }

    #[test]
    fn restarts_get_the_exact_original_input() {
        let mut paused = Part::tool_request("t", Some("r1".into()), Some(json!({"amount": 500.0})));
        paused.set_meta("interrupt", json!(true));
        let history = vec![Message::user_text("x"), Message::new(Role::Model, vec![paused])];
        let js = Part::tool_request("t", Some("r1".into()), Some(json!({"amount": 500})));
        let changed = Part::tool_request("t", Some("r1".into()), Some(json!({"amount": 501})));
        let mut restart = vec![js, changed];
        restore_inputs(&mut restart, &history);
        let input = |p: &Part| p.as_tool_request().unwrap().input.clone().unwrap();
        assert_eq!(input(&restart[0]).to_string(), r#"{"amount":500.0}"#);
        assert_eq!(input(&restart[1]), json!({"amount": 501}));
    }
}
