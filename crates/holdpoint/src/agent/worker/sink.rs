//! Where a run's turns and its end go (docs/reference.md §6, §7): to the
//! caller while it is attached (chunks, `turnEnd`, one output), or into
//! the pending row once it detached; and the store writes of a turn's
//! outcome (server-managed agents): the completed snapshot, the `failed`
//! one, and reading back lent state.
//!
//! Invariants: the caller gets exactly one output (the detach answer, or
//! the run's end); an attached turn is persisted before it is announced;
//! a detached run writes its turns' state only into its pending row,
//! finalized once. A turn that holds a claim writes its outcome only
//! through its [`Hold`], under the claimed snapshot's successor id, so a
//! claim taken over never gets two successors.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{oneshot, watch};

use super::super::AgentDef;
use super::super::detach::{self, Detached};
use super::super::handoff::{self, HandedUp};
use super::super::hold::Hold;
use super::super::io::{AgentOutput, AgentStreamChunk, TurnEnd};
use super::super::load::{Holds, Session};
use super::super::turn::{Responder, last_model};
use crate::error::{Error, Result};
use crate::message::{Message, Role};
use crate::model::{FinishReason, GenerateChunk};
use crate::session::{SessionState, Snapshot, SnapshotStatus, mint_id, prepare_row};

/// The sink of the run's current mode.
pub(super) enum Sink {
    /// The caller listens: chunks stream, and it gets the run's output.
    Attached(Attached),
    /// The caller heard `detached`: the run ends in its pending row.
    Detached(Detached),
}

/// A run whose caller waits for its output.
pub(super) struct Attached {
    output: Option<oneshot::Sender<Result<AgentOutput>>>,
    /// Set once the output is sent: the connection takes no more inputs.
    ended: Arc<AtomicBool>,
}

/// A turn's result to hand to the sink.
pub(super) struct Finished<'a> {
    pub state: SessionState,
    pub message: Option<&'a Message>,
    pub finish: FinishReason,
    pub hold: Option<Box<Hold>>,
    /// Its children's rows, and the parent to hand its row to.
    pub levels: Levels,
}

impl Sink {
    /// An attached run answering on `output`.
    pub fn attached(output: Option<oneshot::Sender<Result<AgentOutput>>>, ended: Arc<AtomicBool>) -> Sink {
        Sink::Attached(Attached { output, ended })
    }

    /// Whether the run detached (it reads no further caller input, and
    /// aborts are watched).
    pub fn is_detached(&self) -> bool {
        matches!(self, Sink::Detached(_))
    }

    /// Detaches an attached run at `at` (the session before the running
    /// turn): writes the pending row (under `successor` when given), stops
    /// the chunks and answers `detached` at once. Fails, changing nothing,
    /// when the row cannot be written (or the agent has no store).
    pub async fn detach(
        &mut self,
        def: &AgentDef,
        at: &Session,
        abort: &watch::Sender<bool>,
        successor: Option<String>,
        responder: &Responder,
    ) -> Result<()> {
        let Sink::Attached(attached) = self else {
            return Ok(());
        };
        let d = detach::begin(def, at, abort.clone(), successor).await?;
        responder.detach();
        attached.send(Ok(AgentOutput {
            session_id: at.state.session_id.clone(),
            snapshot_id: Some(d.id.clone()),
            finish_reason: FinishReason::Detached,
            message: None,
            artifacts: at.state.artifacts.clone(),
            state: None,
            error: None,
            failure: None,
            held_for: None,
        }));
        *self = Sink::Detached(d);
        Ok(())
    }

    /// Takes a turn that ended: persisted, then announced (attached), or
    /// kept for the pending row (detached). Both first confirm the turn's
    /// hold. `None` when the turn counts; else how the run ends.
    pub async fn done(
        &mut self,
        def: &AgentDef,
        session: &mut Session,
        responder: &Responder,
        turn: Finished<'_>,
    ) -> Option<super::Outcome> {
        let confirmed = match &turn.hold {
            Some(hold) => hold.confirm().await,
            None => Ok(()),
        };
        // Only an attached outcome writes the children's rows with its
        // own; every other end writes them on their own, first.
        if !matches!((&*self, &confirmed), (Sink::Attached(_), Ok(()))) {
            turn.levels.write_children(def).await;
        }
        match (self, confirmed) {
            (Sink::Detached(_), Err(e)) => {
                // Taken over while detached: the settlement owns the
                // pending row now; write nothing.
                tracing::warn!(error = %e, "a detached resume finished after its claim was taken over");
                Some(super::Outcome::Lost)
            }
            (Sink::Detached(_), Ok(())) => {
                session.state = turn.state;
                None
            }
            (Sink::Attached(_), Err(e)) => Some(super::Outcome::Refused(e)),
            (Sink::Attached(_), Ok(())) => {
                let Finished {
                    state,
                    message,
                    finish,
                    hold,
                    levels,
                } = turn;
                if let Err(e) = commit(def, session, state, finish, hold, levels).await {
                    return Some(super::Outcome::Refused(e));
                }
                announce(session, responder, message, finish);
                None
            }
        }
    }

    /// After a turn failed with `error` (its hold confirmed, `session`
    /// back at the state to keep): how the run ends. An attached run
    /// first records a `failed` snapshot when the turn `claimed` or kept a
    /// seam; a detached run's pending row takes the failure instead.
    pub async fn failed(
        &self,
        def: &AgentDef,
        session: &mut Session,
        error: Error,
        hold: Option<&Hold>,
        record: bool,
        levels: &Levels,
    ) -> super::Outcome {
        if self.is_detached() || !record {
            levels.write_children(def).await;
            return super::Outcome::Failed(error);
        }
        match record_failure(def, session, &error, hold, levels).await {
            Ok(()) => super::Outcome::Failed(error),
            Err(refused) => {
                tracing::warn!(error = %error, "a resume failed after its claim was taken over");
                super::Outcome::Refused(refused)
            }
        }
    }

    /// Ends the run failed with `error`: told to the caller, or written
    /// into the pending row with `state`.
    pub async fn fail(self, def: &AgentDef, session: &Session, responder: &Responder, error: Error) {
        match self {
            Sink::Attached(mut a) => a.fail(def, session, responder, error),
            Sink::Detached(d) => {
                let body = Some(error.body());
                d.finalize(
                    SnapshotStatus::Failed,
                    session.state.clone(),
                    FinishReason::Failed,
                    body,
                )
                .await;
            }
        }
    }

    /// Ends the run failed with `error` told to the caller only: a
    /// detached run's pending row is left as it is (its claim is another
    /// process's, or what it should hold cannot be known).
    pub fn refuse(self, def: &AgentDef, session: &Session, responder: &Responder, error: Error) {
        match self {
            Sink::Attached(mut a) => a.fail(def, session, responder, error),
            // The caller heard `detached` already; no chunk reaches it.
            Sink::Detached(_) => tracing::warn!(error = %error, "turn failed"),
        }
    }

    /// Ends a detached run aborted, its pending row keeping `session`'s
    /// state (the state before the turn that was stopped). Aborts are
    /// watched only once detached.
    pub async fn abort(self, session: &Session) {
        if let Sink::Detached(d) = self {
            d.finalize(
                SnapshotStatus::Aborted,
                session.state.clone(),
                FinishReason::Aborted,
                None,
            )
            .await;
        }
    }

    /// Ends the run after its last input: the output of its last turn, or
    /// the pending row completed. A `None` message stands for the
    /// session's last model message.
    pub async fn finish(self, def: &AgentDef, mut session: Session, message: Option<Message>, finish: FinishReason) {
        match self {
            Sink::Attached(mut a) => {
                let message = match message {
                    Some(message) => Some(message),
                    // A client-managed agent's output carries its state,
                    // the message included: copied then.
                    None if def.store.is_none() => last_model(&session.state.messages).cloned(),
                    // The session ends here: the message moves out of it.
                    None => take_last_model(&mut session.state.messages),
                };
                a.send(output(def, &session, message, finish, None));
            }
            Sink::Detached(d) => {
                d.finalize(SnapshotStatus::Completed, session.state, finish, None).await;
            }
        }
    }
}

impl Attached {
    fn send(&mut self, output: Result<AgentOutput>) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(tx) = self.output.take() {
            // The caller may have dropped the connection; the run still counts.
            let _ = tx.send(output);
        }
    }

    fn fail(&mut self, def: &AgentDef, session: &Session, responder: &Responder, error: Error) {
        tracing::warn!(error = %error, "turn failed");
        turn_end(responder, FinishReason::Failed, session.snapshot_id.clone());
        self.send(output(def, session, None, FinishReason::Failed, Some(&error)));
    }
}

/// Announces a persisted turn: its interrupts (logged, and streamed as a
/// tool-role chunk), then its `turnEnd`.
fn announce(session: &Session, responder: &Responder, message: Option<&Message>, finish: FinishReason) {
    if finish == FinishReason::Interrupted
        && let Some(m) = message.or_else(|| last_model(&session.state.messages))
    {
        for p in m.interrupts() {
            tracing::info!(
                snapshot_id = session.snapshot_id.as_deref().unwrap_or(""),
                tool = p.as_tool_request().map(|r| r.name.as_str()).unwrap_or(""),
                held_by = p.interrupted_by().unwrap_or("tool"),
                "interrupt held"
            );
        }
        if responder.is_attached() {
            let parts: Vec<_> = m.interrupts().cloned().collect();
            responder.send_model_chunk(GenerateChunk::new(Role::Tool, parts));
        }
    }
    turn_end(responder, finish, session.snapshot_id.clone());
}

/// Moves the last model message out of `messages` (their order is not
/// kept: they are dropped after).
fn take_last_model(messages: &mut Vec<Message>) -> Option<Message> {
    let at = messages.iter().rposition(|m| m.role == Role::Model)?;
    Some(messages.swap_remove(at))
}

fn turn_end(responder: &Responder, finish_reason: FinishReason, snapshot_id: Option<String>) {
    responder.send(AgentStreamChunk {
        turn_end: Some(TurnEnd {
            finish_reason,
            snapshot_id,
        }),
        ..Default::default()
    });
}

/// The run's output: the session as it ends (with its encoded state for
/// client-managed agents).
fn output(
    def: &AgentDef,
    session: &Session,
    message: Option<Message>,
    finish_reason: FinishReason,
    error: Option<&Error>,
) -> Result<AgentOutput> {
    let state = if def.store.is_none() {
        Some(def.codec.encode(&session.state)?)
    } else {
        None
    };
    Ok(AgentOutput {
        session_id: session.state.session_id.clone(),
        snapshot_id: session.snapshot_id.clone(),
        finish_reason,
        message,
        artifacts: session.state.artifacts.clone(),
        state,
        error: error.map(Error::body),
        failure: error.map(crate::agent::FailureReason::of),
        held_for: None,
    })
}

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
async fn commit(
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
        let id = hold.as_ref().map_or_else(mint_id, |h| h.successor().to_owned());
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
        Some(hold) if !hold.takes_over() => {
            handoff::write_with(store.as_ref(), children, (hold.successor().to_owned(), row))
                .await
                .map_err(|e| hold.outcome_refused(e))?
        }
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
async fn record_failure(
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
