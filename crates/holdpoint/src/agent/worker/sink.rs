//! Where a run's turns and its end go: to the caller while it is attached
//! (chunks, `turnEnd`, one output), or into the pending row once it
//! detached (docs/reference.md §6).
//!
//! Invariants: the caller gets exactly one output (the detach answer, or
//! the run's end); an attached turn is persisted before it is announced;
//! a detached run writes its turns' state only into its pending row,
//! finalized once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{oneshot, watch};

use super::super::AgentDef;
use super::super::detach::{self, Detached};
use super::super::hold::Hold;
use super::super::io::{AgentOutput, AgentStreamChunk, TurnEnd};
use super::super::load::Session;
use super::super::turn::Responder;
use super::write::{self, Levels};
use crate::error::{Error, Result};
use crate::message::{Message, Role};
use crate::model::{FinishReason, GenerateChunk};
use crate::session::{SessionState, SnapshotStatus};

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
                if let Err(e) = write::commit(def, session, state, finish, hold, levels).await {
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
        match write::record_failure(def, session, &error, hold, levels).await {
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
    /// the pending row completed.
    pub async fn finish(self, def: &AgentDef, session: &Session, message: Option<Message>, finish: FinishReason) {
        match self {
            Sink::Attached(mut a) => a.send(output(def, session, message, finish, None)),
            Sink::Detached(d) => {
                d.finalize(SnapshotStatus::Completed, session.state.clone(), finish, None)
                    .await;
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
        && let Some(m) = message
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
