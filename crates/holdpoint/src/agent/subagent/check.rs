//! Nested answers checked level by level before the root's claim
//! (docs/reference.md §16.3, §10.10): each child's paused snapshot must be
//! its agent's and still wait, and its answers pass the checks of the
//! root's own ([`decide::check_level`]). Reads only.

use super::{REF_SEPARATOR, SurfacedHold, nest, nested_error, nested_resume};
use crate::agent::audit;
use crate::agent::decide::{self, Decider, Level};
use crate::error::{Error, Result};
use crate::generate::{Resume, validate_resume};
use crate::message::{Role, metadata};
use crate::session::{HoldApproval, SessionStore, Snapshot};

/// How deep nested answers are followed.
const MAX_DEPTH: usize = 16;

/// Checks, level by level, the nested answers of every restart of a
/// surfaced hold in `resume` against the child's paused snapshot: it must
/// be its agent's and still wait, and its answers pass the same checks as
/// the root's. Reads only. `caller`: the snapshot (or session) the caller
/// named, which refusals name first.
pub(super) async fn check_children(
    store: &dyn SessionStore,
    level: &Level<'_>,
    resume: &Resume,
    decider: &Decider<'_>,
    caller: &str,
    depth: usize,
    read: &mut Vec<Snapshot>,
) -> Result<()> {
    let Some(pending) = level.messages.iter().rev().find(|m| m.role == Role::Model) else {
        return Ok(());
    };
    if !pending.interrupts().any(SurfacedHold::is_surfaced) {
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "nested answers deeper than {MAX_DEPTH} sub-agent levels"
        )));
    }
    for directive in &resume.restart {
        let Some(target) = audit::target_of(level.messages, directive) else {
            continue;
        };
        let Some(hold) = SurfacedHold::of(target) else {
            continue;
        };
        let name = decide::tool_name(target).to_owned();
        let resumed = metadata::marker(directive.metadata.as_ref(), metadata::RESUMED)?
            .map(metadata::Marker::into_object)
            .unwrap_or_default();
        let mut nested = nested_resume(&name, &resumed)?;
        let snapshot = waiting_child(store, &hold, &name, caller).await?;
        let messages = snapshot.state.as_ref().map_or(&[][..], |s| s.messages.as_slice());
        nest(messages, &mut nested)?;
        validate_resume(messages, &nested).map_err(|e| nested_error(&name, e))?;
        let child = level
            .def
            .and_then(|d| d.children.iter().find(|c| c.name() == hold.agent));
        let segment = target.ref_segment().unwrap_or(name.as_str());
        // Approvals of this level name a nested call by its ref below it.
        let child_prefix = format!("{segment}{}", REF_SEPARATOR);
        // The root records approvals of a nested call under its compound
        // ref; the child's own count too.
        let mut approvals = approvals_below(&level.approvals, &child_prefix);
        approvals.extend(snapshot.approvals.iter().cloned());
        // Every child level is authorised, known sub-agent or not: the
        // child's own claim trusts its parent's check.
        let child_level = Level {
            def: child.map(|c| c.def.as_ref()),
            messages,
            owner: snapshot.owner.as_deref(),
            approvals,
        };
        decide::check_level(&child_level, &nested, decider)?;
        Box::pin(check_children(
            store,
            &child_level,
            &nested,
            decider,
            caller,
            depth + 1,
            &mut Vec::new(),
        ))
        .await?;
        read.push(snapshot);
    }
    Ok(())
}

/// The sub-agent's snapshot a surfaced hold names, which must be its
/// agent's, in this store, and still waiting; the refusal names the
/// caller's snapshot first (the child's is context).
async fn waiting_child(store: &dyn SessionStore, hold: &SurfacedHold, name: &str, caller: &str) -> Result<Snapshot> {
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
    if snapshot.is_waiting() {
        return Ok(snapshot);
    }
    let why = if snapshot.resumed_at.is_some() {
        "already resumed".to_owned()
    } else {
        format!("status {}", snapshot.status.as_str())
    };
    Err(Error::AlreadyAnswered(format!(
        "{caller} was already resumed: its sub-agent call \"{name}\" no longer waits (agent \"{}\", snapshot {}: {why})",
        hold.agent, hold.snapshot_id
    )))
}

/// The approvals of a level recorded for calls below `prefix` (a nested
/// call's compound ref), with the ref as the level below names them.
fn approvals_below(approvals: &[HoldApproval], prefix: &str) -> Vec<HoldApproval> {
    approvals
        .iter()
        .filter_map(|a| {
            let inner = a.reference.as_deref()?.strip_prefix(prefix)?;
            let mut a = a.clone();
            a.reference = Some(inner.to_owned()).filter(|r| !r.is_empty() && *r != a.tool);
            Some(a)
        })
        .collect()
}
