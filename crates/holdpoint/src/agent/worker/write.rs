//! The store writes of a turn's outcome (server-managed agents): the
//! completed snapshot, the `failed` one, and reading back lent state.
//!
//! Invariant: a turn that holds a claim writes its outcome only through
//! its [`Hold`], under the claimed snapshot's successor id, so a claim
//! taken over never gets two successors.

use std::sync::Arc;

use super::super::AgentDef;
use super::super::handoff::{self, HandedUp};
use super::super::hold::Hold;
use super::super::load::{Holds, Session};
use crate::error::{Error, Result};
use crate::model::FinishReason;
use crate::session::{SessionState, Snapshot, SnapshotStatus, mint_id, prepare_row};

/// Where a turn's row goes besides its own write: the rows its sub-agent
/// calls handed up (written in one step with it), and the parent's turn
/// to hand them all to instead, when this run is a sub-agent call.
#[derive(Default)]
pub(super) struct Levels {
    pub children: Option<Arc<HandedUp>>,
    pub parent: Option<Arc<HandedUp>>,
}

impl Levels {
    /// The rows the turn's sub-agent calls handed up, taken.
    fn take_children(&self) -> Vec<(String, Snapshot)> {
        self.children.as_ref().map(|c| c.take()).unwrap_or_default()
    }

    /// Writes the handed-up rows on their own, for a turn whose outcome is
    /// not written here (detached, or its claim lost).
    pub(super) async fn write_children(&self, def: &AgentDef) {
        if let Some(store) = &def.store {
            handoff::write_alone(store.as_ref(), self.take_children()).await;
        }
    }
}

/// Writes the completed snapshot of a turn and makes it the session's;
/// without a store the state just becomes the session's. A sub-agent
/// call's row (with its children's) is handed to its parent's turn
/// instead, which writes it with its own.
pub(super) async fn commit(
    def: &AgentDef,
    session: &mut Session,
    state: SessionState,
    finish: FinishReason,
    hold: Option<Box<Hold>>,
    levels: Levels,
) -> Result<()> {
    let Some(store) = &def.store else {
        session.state = state;
        return Ok(());
    };
    // The state moves into the row and comes back with the row written
    // (a store returns what it wrote): no copy of the conversation.
    let mut row = Snapshot::new(state);
    row.parent_id = session.snapshot_id.clone();
    row.finish_reason = Some(finish);
    row.agent = Some(def.name.clone());
    row.owner = session.owner.clone();
    let parent = levels.parent.as_ref().filter(|p| p.same_store(store));
    if let Some(parent) = parent
        && hold.as_ref().is_none_or(|h| !h.takes_over())
    {
        let id = hold.as_ref().map_or_else(mint_id, |h| h.successor());
        let row = prepare_row(&id, None, row)?;
        // The conversation goes up with the row; the session keeps what
        // the run's output reports.
        let mut shell = SessionState::new(row.session_id.clone());
        if let Some(state) = &row.state {
            shell.artifacts.clone_from(&state.artifacts);
        }
        if let Some(children) = &levels.children {
            parent.adopt(children);
        }
        parent.hand_up((id.clone(), row), hold);
        settled(session, id, shell, finish);
        return Ok(());
    }
    let children = levels.take_children();
    let saved = match hold {
        Some(hold) if !hold.takes_over() => handoff::write_with(store.as_ref(), children, (hold.successor(), row))
            .await
            .map_err(|e| hold.outcome_refused(e))?,
        Some(hold) => {
            handoff::write_alone(store.as_ref(), children).await;
            hold.write_outcome(row).await?
        }
        None if children.is_empty() => store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await?
            .ok_or_else(|| Error::Internal("the turn's snapshot was not written".into()))?,
        None => handoff::write_with(store.as_ref(), children, (mint_id(), row)).await?,
    };
    let state = saved.state.ok_or_else(|| {
        Error::Internal(format!(
            "the store wrote snapshot {} without its state",
            saved.snapshot_id
        ))
    })?;
    settled(session, saved.snapshot_id, state, finish);
    Ok(())
}

/// Makes the row just written (or handed up) the session's.
fn settled(session: &mut Session, snapshot_id: String, state: SessionState, finish: FinishReason) {
    session.snapshot_id = Some(snapshot_id);
    session.state = state;
    session.holds = if finish == FinishReason::Interrupted {
        Holds::Open
    } else {
        Holds::None
    };
    session.latest = true;
}

/// After a turn failed past a claim or a seam: a `failed` child snapshot
/// holding the conversation up to its last completed tool round, so the
/// session can go on and nothing that ran is run again. Fails only when
/// the successor id was taken (the claim was taken over and its outcome
/// written first); other store errors are logged.
pub(super) async fn record_failure(
    def: &AgentDef,
    session: &mut Session,
    error: &Error,
    hold: Option<&Hold>,
    levels: &Levels,
) -> Result<()> {
    let Some(store) = &def.store else { return Ok(()) };
    // The rows its sub-agent calls handed up go first, on their own: a
    // failed turn's row names none of them.
    levels.write_children(def).await;
    let mut row = Snapshot::new(session.state.clone());
    row.parent_id = session.snapshot_id.clone();
    row.status = SnapshotStatus::Failed;
    row.finish_reason = Some(FinishReason::Failed);
    row.error = Some(error.body());
    row.agent = Some(def.name.clone());
    row.owner = session.owner.clone();
    let saved = match hold {
        Some(hold) => hold.write_outcome(row).await.map(Some),
        None => store.save_snapshot(None, Box::new(move |_| Ok(Some(row)))).await,
    };
    match saved {
        Ok(Some(saved)) => {
            session.snapshot_id = Some(saved.snapshot_id);
            session.holds = Holds::None;
            session.latest = true;
        }
        Ok(None) => {}
        Err(e @ Error::ClaimLost(_)) if hold.is_some() => return Err(e),
        Err(e) => tracing::error!(error = %e, "could not record a failed turn"),
    }
    Ok(())
}

/// Puts the state a failed last turn borrowed back into `session`, read
/// from the snapshot it was loaded from. A session never saved had only
/// its id, which is what [`Session::lend_state`] left in place. False when
/// the read fails.
pub(super) async fn restore_lent(def: &AgentDef, session: &mut Session) -> bool {
    let (Some(store), Some(id)) = (&def.store, &session.snapshot_id) else {
        return true;
    };
    match store.get_snapshot(id).await {
        Ok(Some(Snapshot { state: Some(state), .. })) => {
            session.state = state;
            true
        }
        Ok(_) => {
            tracing::error!(snapshot_id = %id, "the snapshot a failed turn started from is gone");
            false
        }
        Err(e) => {
            tracing::error!(snapshot_id = %id, error = %e, "could not read back the snapshot a failed turn started from");
            false
        }
    }
}
