//! Abandoning children (docs/reference.md §16.5): when a new message
//! abandons a parent's paused calls, the children whose holds those calls
//! surfaced are abandoned too, at every depth, so their holds are no
//! longer listed nor answerable on their own.

use serde_json::{Map, Value};

use super::SurfacedHold;
use crate::agent::audit::{self, AuditContext};
use crate::agent::{ACTOR, principal_of};
use crate::message::{Message, Role};
use crate::session::{ResumeClaim, SessionStore};

/// Claims every waiting child snapshot that the last model message of
/// `history` surfaced, recording an `abandoned` decision per paused call
/// (each in the child's own session). A child claimed already (answered,
/// abandoned, resuming) is left alone; store errors are logged, since the
/// parent's calls are abandoned either way.
pub(crate) async fn abandon_children(
    store: &dyn SessionStore,
    history: &[Message],
    context: &Map<String, Value>,
    lease: std::time::Duration,
) {
    abandon_holds(store, pending_holds(history), context, lease).await;
}

/// The lease of a claim that abandons a background child's holds.
pub(crate) const LEASE: std::time::Duration = crate::session::HEARTBEAT_EXPIRY;

/// [`abandon_children`] from the child snapshots `holds` name.
pub(crate) async fn abandon_holds(
    store: &dyn SessionStore,
    holds: Vec<SurfacedHold>,
    context: &Map<String, Value>,
    lease: std::time::Duration,
) {
    let mut queue = holds;
    // Bounded: each level is a distinct, strictly older snapshot, and a
    // child claimed here is not waiting any more.
    let mut budget = 256usize;
    while let Some(hold) = queue.pop() {
        if budget == 0 {
            tracing::warn!("sub-agent abandonment stopped: too many nested holds");
            return;
        }
        budget -= 1;
        let snapshot = match store.get_snapshot(&hold.snapshot_id).await {
            Ok(Some(s)) if s.belongs_to(&hold.agent) && s.is_waiting() => s,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, snapshot_id = %hold.snapshot_id, "a sub-agent's hold could not be abandoned");
                continue;
            }
        };
        let messages = snapshot
            .state
            .as_ref()
            .map(|s| s.messages.as_slice())
            .unwrap_or_default();
        let ctx = AuditContext {
            principal: principal_of(context),
            actor: context.get(ACTOR).and_then(Value::as_str),
            agent: &hold.agent,
            session_id: &snapshot.session_id,
            snapshot_id: &snapshot.snapshot_id,
        };
        let records = audit::abandoned(&ctx, messages);
        let claim = ResumeClaim::new(snapshot.snapshot_id.clone()).lease(lease);
        match store.claim_resume(claim, records).await {
            Ok(()) => queue.extend(pending_holds(messages)),
            Err(e) => {
                tracing::info!(error = %e, snapshot_id = %hold.snapshot_id, "a sub-agent's hold was already closed")
            }
        }
    }
}

fn pending_holds(history: &[Message]) -> Vec<SurfacedHold> {
    history
        .iter()
        .rev()
        .find(|m| m.role == Role::Model)
        .map(|m| m.interrupts().filter_map(SurfacedHold::of).collect())
        .unwrap_or_default()
}
