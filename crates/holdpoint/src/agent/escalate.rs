//! An escalation recorded on a hold (`escalate_after` + `escalate_to`,
//! docs/reference.md §11.3): the added roles become approvers of the
//! held call on every row that checks who may answer it.
//!
//! Invariants: a hold a sub-agent surfaced is checked twice when it is
//! answered — at the root (listings, the approver check) and again in the
//! child's session the answer is routed to — so both rows get the roles,
//! the deepest first: the root lists the hold to the new approvers only
//! once every level below takes their answer. Each row's change is one
//! compare-and-set ([`escalated_hold`]) and changes nothing the second
//! time, so an escalation that fires twice, or is retried after a
//! partial write, ends the same.

use std::sync::Arc;

use super::Agent;
use crate::error::Result;
use crate::message::Part;
use crate::message::metadata::REF_SEPARATOR;
use crate::message::surfaced::SurfacedHold;
use crate::session::SessionStore;
use crate::session::outbox::escalated_hold;

/// One row to escalate: its id and the call as that row names it.
struct Level {
    snapshot_id: String,
    reference: Option<String>,
}

/// Adds `roles` to the approvers of the held call `tool` / `reference` of
/// `snapshot_id` and of the sub-agent levels it surfaced.
pub(super) async fn escalate(
    agent: &Agent,
    snapshot_id: &str,
    reference: Option<&str>,
    tool: &str,
    roles: &[String],
) -> Result<()> {
    let store = agent.require_store()?;
    let Some(root) = store.get_snapshot(snapshot_id).await? else {
        return Ok(());
    };
    let mut levels = vec![Level {
        snapshot_id: snapshot_id.to_owned(),
        reference: reference.map(str::to_owned),
    }];
    if let Some(last) = root.state.as_ref().and_then(|s| s.messages.last()) {
        below(&last.content, reference, tool, &mut levels);
    }
    for level in levels.iter().rev() {
        save(store, level, tool, roles).await?;
    }
    Ok(())
}

/// Pushes the child rows a compound `reference` goes down through from
/// the paused `parts` of a row (one per sub-agent level), each with the
/// call's ref as that child names it.
fn below(parts: &[Part], reference: Option<&str>, tool: &str, levels: &mut Vec<Level>) {
    let Some((head, rest)) = reference.and_then(|r| r.split_once(REF_SEPARATOR)) else {
        return;
    };
    let Some(hold) = parts
        .iter()
        .filter(|p| p.is_interrupt() && p.ref_segment() == Some(head))
        .find_map(SurfacedHold::of)
    else {
        return;
    };
    // A nested call without a ref is named by its tool (`OUTER/tool`).
    let unnamed = rest == tool
        && !hold.interrupts.iter().any(|p| {
            p.as_tool_request()
                .is_some_and(|r| r.reference.as_deref() == Some(rest))
        });
    let inner = (!unnamed).then(|| rest.to_owned());
    levels.push(Level {
        snapshot_id: hold.snapshot_id.clone(),
        reference: inner.clone(),
    });
    // Deeper levels are carried inside the child's own paused calls.
    below(&hold.interrupts, inner.as_deref(), tool, levels);
}

/// One row's compare-and-set.
async fn save(store: &Arc<dyn SessionStore>, level: &Level, tool: &str, roles: &[String]) -> Result<()> {
    let (reference, tool, roles) = (level.reference.clone(), tool.to_owned(), roles.to_vec());
    store
        .save_snapshot(
            Some(&level.snapshot_id),
            Box::new(move |existing| {
                Ok(existing.and_then(|row| escalated_hold(row, reference.as_deref(), &tool, &roles)))
            }),
        )
        .await?;
    Ok(())
}
