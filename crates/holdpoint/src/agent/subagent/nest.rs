//! Routing answers to nested holds (docs/reference.md §16.3): a directive
//! naming a nested call by its compound ref becomes part of a restart of
//! the parent's call that surfaced it; every nested answer is checked
//! against the child's paused snapshot before anything is claimed.

use super::tool::nested_resume;
use super::{REF_SEPARATOR, SUBAGENT, SurfacedHold};
use crate::error::{Error, Result};
use crate::generate::{Resume, validate_resume};
use crate::message::{Message, Part, Role, metadata};
use crate::session::SessionStore;

/// How deep nested answers are followed (a parent calling itself through
/// its children would otherwise recurse without end).
const MAX_DEPTH: usize = 16;

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

/// The segment naming `part` in a compound ref: its ref, or its tool when
/// it has none.
fn segment(part: &Part) -> Option<&str> {
    let req = part.as_tool_request()?;
    Some(req.reference.as_deref().unwrap_or(&req.name))
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
/// surfaced hold it belongs to and the directive as the child sees it.
fn route(pending: &Message, directive: &Part) -> Option<(usize, Part)> {
    let (name, reference) = name_ref(directive)?;
    if pending.content.iter().any(|p| is_call(p, name, reference)) {
        return None;
    }
    let (head, rest) = reference?.split_once(REF_SEPARATOR)?;
    let index = pending
        .content
        .iter()
        .position(|p| segment(p) == Some(head) && SurfacedHold::of(p).is_some())?;
    Some((index, with_ref(directive, Some(rest))))
}

/// A directive whose ref is its tool's name, for a paused call of
/// `pending` without a ref: the ref dropped (how a compound ref names a
/// call without one).
fn unnamed(pending: &Message, directive: &Part) -> Option<Part> {
    let (name, reference) = name_ref(directive)?;
    (reference == Some(name)
        && !pending.content.iter().any(|p| is_call(p, name, reference))
        && pending.content.iter().any(|p| is_call(p, name, None)))
    .then(|| with_ref(directive, None))
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
    let mut place = |directive: Part, respond: bool, keep: &mut Vec<Part>| {
        let directive = unnamed(pending, &directive).unwrap_or(directive);
        match route(pending, &directive) {
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

/// Checks every restart of a surfaced hold in `resume` (already nested and
/// validated against `history`) against the child's paused snapshot in
/// `store`, level by level: the child snapshot must be its agent's and
/// still wait for an answer, and the nested answers must be valid for it.
/// Reads only; nothing is claimed or written.
pub(crate) async fn check_nested(store: &dyn SessionStore, history: &[Message], resume: &Resume) -> Result<()> {
    check_level(store, history, resume, 0).await
}

async fn check_level(store: &dyn SessionStore, history: &[Message], resume: &Resume, depth: usize) -> Result<()> {
    let Some(pending) = last_model(history) else {
        return Ok(());
    };
    if !pending.interrupts().any(|p| SurfacedHold::of(p).is_some()) {
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "nested answers deeper than {MAX_DEPTH} sub-agent levels"
        )));
    }
    for directive in &resume.restart {
        let Some((name, reference)) = name_ref(directive) else {
            continue;
        };
        let Some(hold) = pending
            .content
            .iter()
            .find(|p| is_call(p, name, reference))
            .and_then(SurfacedHold::of)
        else {
            continue;
        };
        let resumed = metadata::marker(directive.metadata.as_ref(), metadata::RESUMED)?
            .map(metadata::Marker::into_object)
            .unwrap_or_default();
        let mut nested = nested_resume(name, &resumed)?;
        let snapshot = store
            .get_snapshot(&hold.snapshot_id)
            .await?
            .filter(|s| s.belongs_to(&hold.agent))
            .ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "sub-agent snapshot {} of call \"{name}\" is not in this agent's store (a sub-agent must keep its sessions in its parent's store)",
                    hold.snapshot_id
                ))
            })?;
        if !snapshot.is_waiting() {
            return Err(Error::AlreadyResumed(hold.snapshot_id));
        }
        let messages = snapshot.state.map(|s| s.messages).unwrap_or_default();
        nest(&messages, &mut nested)?;
        validate_resume(&messages, &nested).map_err(|e| nested_error(name, e))?;
        Box::pin(check_level(store, &messages, &nested, depth + 1)).await?;
    }
    Ok(())
}

/// A child's refusal, said as the nested call's.
fn nested_error(tool: &str, error: Error) -> Error {
    match error {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("sub-agent call \"{tool}\": {m}")),
        other => other,
    }
}
