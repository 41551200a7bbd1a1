//! Routing answers to nested holds (docs/reference.md §16.3): a directive
//! naming a nested call by its compound ref becomes part of a restart of
//! the parent's call that surfaced it; every nested answer is checked
//! against the child's paused snapshot before anything is claimed.

use super::{REF_SEPARATOR, SUBAGENT, SurfacedHold};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::{Message, Part, Role, metadata};

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
        let d = forward(pending, d)?;
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

/// A restart of a sub-agent call itself, as the root's output shows it,
/// that carries no nested answers (no `subagent` key in its resume data,
/// its input unchanged): it answers the one call the child holds, so it
/// becomes a restart of that call under its compound ref, with the same
/// resume data. When the child holds several, it is refused naming their
/// refs. Any other directive is returned as it is.
fn forward(pending: &Message, directive: Part) -> Result<Part> {
    let Some((name, reference)) = directive
        .as_tool_request()
        .map(|r| (r.name.as_str(), r.reference.as_deref()))
    else {
        return Ok(directive);
    };
    let Some(outer) = pending.content.iter().find(|p| is_call(p, name, reference)) else {
        return Ok(directive);
    };
    let Some(hold) = SurfacedHold::of(outer) else {
        return Ok(directive);
    };
    let resumed = metadata::marker(directive.metadata.as_ref(), metadata::RESUMED)?;
    let carries_nested = matches!(&resumed, Some(metadata::Marker::Data(map)) if map.contains_key(SUBAGENT));
    if carries_nested || directive.meta(metadata::REPLACED_INPUT).is_some() {
        return Ok(directive);
    }
    let prefix = outer.ref_segment().unwrap_or_default();
    let refs: Vec<String> = hold
        .interrupts
        .iter()
        .filter_map(Part::ref_segment)
        .map(|own| format!("{prefix}{REF_SEPARATOR}{own}"))
        .collect();
    let [only] = hold.interrupts.as_slice() else {
        return Err(Error::InvalidArgument(format!(
            "sub-agent call \"{name}\" holds {} calls of its child ({}): answer each by its compound ref",
            refs.len(),
            refs.join(", ")
        )));
    };
    let mut inner = only.clone();
    if let (Some(r), Some(compound)) = (inner.as_tool_request_mut(), refs.first()) {
        r.reference = Some(compound.clone());
    }
    let mut forwarded = inner.restart(None)?;
    if let Some(value) = directive.meta(metadata::RESUMED) {
        forwarded.set_meta(metadata::RESUMED, value.clone());
    }
    Ok(forwarded)
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
    fn a_plain_restart_of_a_sub_agent_call_answers_its_only_hold() {
        let h = history(vec![surfaced("a", vec![paused("transferMoney", Some("1"))])]);
        let plain = surfaced("a", vec![])
            .restart(Some(json!({"toolApproved": true})))
            .unwrap();
        let mut resume = Resume::from_parts([plain]);
        nest(&h, &mut resume).unwrap();
        assert_eq!(resume.restart.len(), 1);
        let data = metadata::marker(resume.restart[0].metadata.as_ref(), metadata::RESUMED)
            .unwrap()
            .unwrap()
            .into_object();
        let nested: Resume = serde_json::from_value(data[SUBAGENT].clone()).unwrap();
        let inner = &nested.restart[0];
        assert_eq!(inner.as_tool_request().unwrap().name, "transferMoney");
        assert_eq!(inner.as_tool_request().unwrap().reference.as_deref(), Some("1"));
        assert_eq!(inner.meta(metadata::RESUMED), Some(&json!({"toolApproved": true})));
    }

    #[test]
    fn a_plain_restart_of_a_sub_agent_call_holding_several_names_their_refs() {
        let h = history(vec![surfaced(
            "a",
            vec![paused("transferMoney", Some("1")), paused("closeAccount", None)],
        )]);
        let plain = surfaced("a", vec![]).restart(None).unwrap();
        let mut resume = Resume::from_parts([plain.clone()]);
        let err = nest(&h, &mut resume).unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument);
        let message = err.to_string();
        assert!(
            message.contains("a/1") && message.contains("a/closeAccount"),
            "{message}"
        );
    }

    #[test]
    fn a_restart_carrying_nested_answers_or_new_input_is_not_forwarded() {
        let h = history(vec![surfaced("a", vec![paused("transferMoney", Some("1"))])]);
        let nested = surfaced("a", vec![])
            .restart(Some(json!({SUBAGENT: {"restart": []}})))
            .unwrap();
        let edited = surfaced("a", vec![])
            .restart_with_input(json!({"input": "other"}), None)
            .unwrap();
        for directive in [nested, edited] {
            let mut resume = Resume::from_parts([directive.clone()]);
            nest(&h, &mut resume).unwrap();
            assert_eq!(resume.restart, vec![directive]);
        }
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
