//! Routing answers to nested holds (docs/reference.md §16.3): a directive
//! naming a nested call by its compound ref becomes part of a restart of
//! the parent's call that surfaced it; every nested answer is checked
//! against the child's paused snapshot before anything is claimed.

use super::{REF_SEPARATOR, SUBAGENT, SurfacedHold};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::{Message, Part, Role};

fn last_model(history: &[Message]) -> Option<&Message> {
    history.iter().rev().find(|m| m.role == Role::Model)
}

fn name_ref(part: &Part) -> Option<(&str, Option<&str>)> {
    if let Some(r) = part.as_tool_request() {
        return Some((r.name.as_str(), r.reference.as_deref()));
    }
    part.as_tool_response()
        .map(|r| (r.name.as_str(), r.reference.as_deref()))
}

fn is_call(part: &Part, name: &str, reference: Option<&str>) -> bool {
    part.as_tool_request()
        .is_some_and(|r| r.name == name && r.reference.as_deref() == reference)
}

fn with_ref(part: &Part, reference: Option<&str>) -> Part {
    let mut part = part.clone();
    match &mut part.kind {
        crate::message::PartKind::ToolRequest(r) => r.reference = reference.map(str::to_owned),
        crate::message::PartKind::ToolResponse(r) => r.reference = reference.map(str::to_owned),
        _ => {}
    }
    part
}

/// Where `directive` goes: `None` when it answers a call of `pending`
/// itself (or nothing: validation then says so); else the index of the
/// surfaced hold it belongs to and the directive as the child sees it
/// (the first segment of its ref removed; a last segment that names a
/// child call without a ref by its tool becomes no ref).
fn route(pending: &Message, directive: &Part) -> Option<(usize, Part)> {
    let (name, reference) = name_ref(directive)?;
    if pending.content.iter().any(|p| is_call(p, name, reference)) {
        return None;
    }
    let (head, rest) = reference?.split_once(REF_SEPARATOR)?;
    let (index, hold) = pending
        .content
        .iter()
        .enumerate()
        .filter(|(_, p)| p.ref_segment() == Some(head))
        .find_map(|(i, p)| SurfacedHold::of(p).map(|h| (i, h)))?;
    let unnamed = rest == name
        && !hold.interrupts.iter().any(|p| is_call(p, name, Some(rest)))
        && hold.interrupts.iter().any(|p| is_call(p, name, None));
    let inner = if unnamed { None } else { Some(rest) };
    Some((index, with_ref(directive, inner)))
}

/// Rewrites `resume` for the paused session `history`: directives that
/// name a nested call by compound ref (`OUTER/INNER`, as listings show
/// it) are gathered, per surfaced hold, into one restart of the call that
/// surfaced it, with the child's answers as its resume data under
/// `subagent`. Other directives are left as they are.
pub(crate) fn nest(history: &[Message], resume: &mut Resume) -> Result<()> {
    let Some(pending) = last_model(history) else {
        return Ok(());
    };
    let mut groups: Vec<(usize, Resume)> = Vec::new();
    let mut place = |directive: Part, respond: bool, keep: &mut Vec<Part>| match route(pending, &directive) {
        None => keep.push(directive),
        Some((index, inner)) => {
            let slot = match groups.iter().position(|(i, _)| *i == index) {
                Some(at) => at,
                None => {
                    groups.push((index, Resume::default()));
                    groups.len() - 1
                }
            };
            let nested = &mut groups[slot].1;
            if respond {
                nested.respond.push(inner);
            } else {
                nested.restart.push(inner);
            }
        }
    };
    let mut restart = Vec::with_capacity(resume.restart.len());
    for d in std::mem::take(&mut resume.restart) {
        place(d, false, &mut restart);
    }
    let mut respond = Vec::with_capacity(resume.respond.len());
    for d in std::mem::take(&mut resume.respond) {
        place(d, true, &mut respond);
    }
    for (index, nested) in groups {
        let data = serde_json::json!({ SUBAGENT: nested });
        restart.push(pending.content[index].restart(Some(data))?);
    }
    resume.restart = restart;
    resume.respond = respond;
    Ok(())
}

/// A child's refusal, said as the nested call's.
pub(crate) fn nested_error(tool: &str, error: Error) -> Error {
    match error {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("sub-agent call \"{tool}\": {m}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::generate::validate_resume;
    use crate::message::{Part, metadata};

    fn paused(name: &str, reference: Option<&str>) -> Part {
        let mut p = Part::tool_request(name, reference.map(str::to_owned), Some(json!({"amount": 5})));
        p.set_meta(metadata::INTERRUPT, json!({"details": "x"}));
        p
    }

    fn surfaced(reference: &str, inner: Vec<Part>) -> Part {
        let hold = SurfacedHold {
            agent: "banking".into(),
            session_id: "c".into(),
            snapshot_id: "c-1".into(),
            interrupts: inner,
        };
        let mut p = Part::tool_request("banking", Some(reference.into()), Some(json!({"input": "go"})));
        p.set_meta(metadata::INTERRUPT, Value::Object(hold.into_data()));
        p
    }

    fn history(parts: Vec<Part>) -> Vec<Message> {
        vec![Message::user_text("hi"), Message::new(Role::Model, parts)]
    }

    #[test]
    fn compound_refs_gather_into_one_restart_per_surfaced_hold() {
        let h = history(vec![
            surfaced(
                "a",
                vec![paused("transferMoney", Some("1")), paused("closeAccount", None)],
            ),
            paused("own", Some("b")),
        ]);
        let mut transfer = paused("transferMoney", Some("a/1"));
        transfer.remove_meta(metadata::INTERRUPT);
        let close = paused("closeAccount", Some("a/closeAccount"))
            .respond(json!("kept"))
            .unwrap();
        let own = paused("own", Some("b")).restart(None).unwrap();
        let mut resume = Resume {
            restart: vec![transfer.restart(Some(json!({"approved": true}))).unwrap(), own.clone()],
            respond: vec![close],
            metadata: None,
        };
        nest(&h, &mut resume).unwrap();
        assert!(resume.respond.is_empty());
        assert_eq!(resume.restart.len(), 2);
        assert_eq!(resume.restart[0], own, "a direct answer is left as it is");
        let outer = &resume.restart[1];
        assert_eq!(outer.as_tool_request().unwrap().name, "banking");
        let data = metadata::marker(outer.metadata.as_ref(), metadata::RESUMED)
            .unwrap()
            .unwrap()
            .into_object();
        let nested: Resume = serde_json::from_value(data[SUBAGENT].clone()).unwrap();
        assert_eq!(
            nested.restart[0].as_tool_request().unwrap().reference.as_deref(),
            Some("1")
        );
        assert_eq!(
            nested.respond[0].as_tool_response().unwrap().reference,
            None,
            "named by its tool"
        );
        validate_resume(
            &history(vec![paused("transferMoney", Some("1")), paused("closeAccount", None)]),
            &nested,
        )
        .unwrap();
    }

    #[test]
    fn a_compound_ref_without_a_surfaced_hold_is_left_for_validation_to_refuse() {
        let h = history(vec![paused("own", Some("a"))]);
        let forged = paused("transferMoney", Some("a/1")).restart(None).unwrap();
        let mut resume = Resume::from_parts([forged.clone()]);
        nest(&h, &mut resume).unwrap();
        assert_eq!(resume.restart, vec![forged]);
        assert!(validate_resume(&h, &resume).is_err());
    }
}
