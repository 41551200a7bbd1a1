//! What an escalation records on the hold: the roles `escalate_to` adds
//! become approvers of the held call, in the snapshot itself, so listings,
//! the transcript and answers on every replica (and after a restart) let
//! them in from then on (docs/reference.md §11.3).

use serde_json::{Value, json};

use super::APPROVERS;
use crate::message::Part;
use crate::message::metadata::{self, REF_SEPARATOR};
use crate::message::surfaced::SurfacedHold;
use crate::session::snapshot::Snapshot;

/// Interrupt-data key: the roles an escalation added (array of strings),
/// written when the escalation fired.
pub const ESCALATED_TO: &str = "escalatedTo";

/// The rule name recorded on a hold that had no approval rule when it was
/// escalated: its owner still answers it, and so do the added roles.
const ESCALATION_RULE: &str = "escalation";

/// `row` with `roles` added to the approvers of its held call `tool` /
/// `reference` (the call's `approvalRule` and its interrupt data's
/// `approvers`, and recorded under [`ESCALATED_TO`]), or `None` when there
/// is nothing to change: the row no longer waits, holds no such call, or
/// its approvers include every role already (an escalation that fires
/// twice changes the hold once). A hold a sub-agent surfaced is named by
/// its compound ref (`OUTER/INNER`, as listings show it) and escalated
/// where listings and answers read its rule: in the copy of the child's
/// paused call that the root's call carries (docs/reference.md §16.3).
pub fn escalated_hold(row: &Snapshot, reference: Option<&str>, tool: &str, roles: &[String]) -> Option<Snapshot> {
    if !row.is_waiting() || roles.is_empty() {
        return None;
    }
    let mut next = row.clone();
    let last = next.state.as_mut()?.messages.last_mut()?;
    if !escalate_among(&mut last.content, reference, tool, roles) {
        return None;
    }
    next.updated_at = chrono::Utc::now();
    Some(next)
}

/// Escalates the paused call `tool` / `reference` among `parts`, going
/// down through surfaced holds for a compound ref; whether it changed.
fn escalate_among(parts: &mut [Part], reference: Option<&str>, tool: &str, roles: &[String]) -> bool {
    let named = |p: &Part| {
        p.is_interrupt()
            && p.as_tool_request()
                .is_some_and(|r| r.name == tool && r.reference.as_deref() == reference)
    };
    if let Some(part) = parts.iter_mut().find(|p| named(p)) {
        return escalate_call(part, roles);
    }
    let Some((head, rest)) = reference.and_then(|r| r.split_once(REF_SEPARATOR)) else {
        return false;
    };
    let Some(part) = parts
        .iter_mut()
        .find(|p| p.ref_segment() == Some(head) && SurfacedHold::is_surfaced(p))
    else {
        return false;
    };
    let Some(mut hold) = SurfacedHold::of(part) else {
        return false;
    };
    // A nested call without a ref is named by its tool (`OUTER/tool`).
    let changed = escalate_among(&mut hold.interrupts, Some(rest), tool, roles)
        || (rest == tool && escalate_among(&mut hold.interrupts, None, tool, roles));
    if changed {
        let mut interrupt = part.interrupt_data().unwrap_or_default();
        interrupt.extend(hold.into_data());
        part.set_meta(metadata::INTERRUPT, Value::Object(interrupt));
    }
    changed
}

/// Adds `roles` to the approvers of one paused call; whether any was new.
fn escalate_call(part: &mut Part, roles: &[String]) -> bool {
    let mut rule = part
        .meta(metadata::APPROVAL_RULE)
        .cloned()
        .unwrap_or_else(|| json!({"rule": ESCALATION_RULE, "approvers": [], "quorum": 1, "selfApproval": true}));
    let Some(approvers) = rule.get_mut(APPROVERS) else {
        return false;
    };
    if !add_roles(approvers, roles) {
        return false;
    }
    let mut interrupt = part.interrupt_data().unwrap_or_default();
    // Rows written before the rule moved out of the interrupt data carry
    // its approvers there too; they follow the rule.
    if let Some(approvers) = interrupt.get_mut(APPROVERS) {
        add_roles(approvers, roles);
    }
    let mut escalated = interrupt.get(ESCALATED_TO).cloned().unwrap_or_else(|| json!([]));
    add_roles(&mut escalated, roles);
    interrupt.insert(ESCALATED_TO.into(), escalated);
    part.set_meta(metadata::APPROVAL_RULE, rule);
    part.set_meta(metadata::INTERRUPT, Value::Object(interrupt));
    true
}

/// Adds the missing `roles` to the array `list`; whether any was missing.
fn add_roles(list: &mut Value, roles: &[String]) -> bool {
    let Some(list) = list.as_array_mut() else {
        return false;
    };
    let mut changed = false;
    for role in roles {
        if !list.iter().any(|r| r.as_str() == Some(role)) {
            list.push(Value::String(role.clone()));
            changed = true;
        }
    }
    changed
}
