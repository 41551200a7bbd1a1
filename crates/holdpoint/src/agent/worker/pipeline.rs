//! One input's way through the worker: claim → run → settle, ending in
//! one [`Outcome`].
//!
//! Invariants:
//! - A resume claims first, before any detach and before its turn starts
//!   (so before a detach can arrive mid-turn): a refused resume (already
//!   resumed, a bad answer) is answered as such and leaves no pending row
//!   behind, which would otherwise become the session's latest with the
//!   paused calls still open in it, resumable a second time.
//! - `Worker::session` stays the session before the turn until the turn
//!   is settled; a detach mid-turn writes its pending row from it.
//! - Nothing of a turn whose claim was taken over is written.

use std::sync::Arc;

use tracing::Instrument;

use super::claim::{self, Claimed};
use super::execute::{self, TurnDone, TurnFailure, TurnResult};
use super::inbox::Arrival;
use super::sink::Finished;
use super::write::{self, Levels};
use super::{Outcome, Worker};
use crate::agent::handoff::HandedUp;
use crate::error::Result;

use super::super::io::{AgentInput, AgentStreamChunk, TurnStart};
use crate::error::Error;
use crate::message::Role;
use crate::session::SessionState;

/// `INVALID_ARGUMENT` unless an empty input has a conversation to go on
/// with: some messages, and no tool calls left open at its tip (those are
/// answered with a resume). Checked before anything is claimed or run, so
/// a refused empty input changes nothing.
fn continuable(state: &SessionState) -> Result<()> {
    let Some(last) = state.messages.last() else {
        return Err(Error::InvalidArgument(
            "nothing to continue: the conversation has no messages yet; send a message".into(),
        ));
    };
    if last.role == Role::Model && last.content.iter().any(|p| p.as_tool_request().is_some()) {
        return Err(Error::InvalidArgument(
            "the conversation is paused on tool calls: answer them with a resume, or send a message".into(),
        ));
    }
    Ok(())
}

impl Worker {
    /// Handles one input: its claim (and the detach it asks for), its
    /// turn, and the turn's outcome.
    pub(super) async fn handle(&mut self, mut input: AgentInput) -> Outcome {
        let span = tracing::info_span!("turn");
        // Answers built from a listing carry masked values; they answer
        // the real call (docs/reference.md §22.1).
        if let Some(resume) = input.resume.as_mut() {
            crate::review::unmask_resume(&self.session.state.messages, resume);
        }
        let runs_turn = input.runs_turn();
        // An input that detaches announces its turn only if the detach
        // did not happen (refused, or the claim failed first): a detached
        // turn streams nothing, its turnStart included.
        let announce_later = runs_turn && input.is_detach();
        if runs_turn && !announce_later {
            self.start_turn();
        }
        if input.continues()
            && let Err(error) = continuable(&self.session.state)
        {
            return Outcome::Failed(error);
        }
        let claimed = self.claim(&mut input, &span).await;
        if announce_later {
            // Dropped by the responder once detached.
            self.start_turn();
        }
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(outcome) => return outcome,
        };
        if !runs_turn {
            return Outcome::Next;
        }
        // The last turn of a run with a store lends the state instead of
        // copying it: only a failure needs it again, and then it is read
        // back from the store (see `write::restore_lent`).
        let lent = self.inbox.is_drained() && !self.sink.is_detached() && self.def.store.is_some();
        let result = match self.run_turn(input, claimed, lent, span).await {
            Ok(result) => result,
            Err(outcome) => return outcome,
        };
        match result {
            Ok(done) => self.settle_done(done).await,
            Err(failure) => self.settle_failure(failure, lent).await,
        }
    }

    /// Announces the turn about to run: a `turnStart` chunk with its
    /// index, before anything else of it (dropped once detached).
    fn start_turn(&mut self) {
        self.responder.send(AgentStreamChunk {
            turn_start: Some(TurnStart { turn_index: self.turns }),
            ..AgentStreamChunk::default()
        });
        self.turns = self.turns.saturating_add(1);
    }

    /// The claim step, with the detach points around it: a detach without
    /// a store is refused before anything (client-held state included) is
    /// claimed; otherwise the run detaches after the claim, its pending
    /// row taking the id the resume's outcome would.
    async fn claim(&mut self, input: &mut AgentInput, span: &tracing::Span) -> std::result::Result<Claimed, Outcome> {
        let asks_detach = input.is_detach() && !self.sink.is_detached();
        if asks_detach && self.def.store.is_none() {
            self.detach(None).await.map_err(Outcome::Refused)?;
        }
        // Nesting hook: answers to nested holds become restarts of the
        // calls that surfaced them, before anything checks or claims them.
        if let Some(resume) = input.resume.as_mut() {
            self.def
                .nesting
                .route(&self.session.state.messages, resume)
                .map_err(Outcome::Failed)?;
        }
        let claimed = if input.has_payload() {
            let claiming = claim::claim(&self.def, &self.session, input, &self.context);
            claiming.instrument(span.clone()).await.map_err(Outcome::Failed)?
        } else {
            Claimed::default()
        };
        if input.is_detach() && !self.sink.is_detached() {
            self.detach(claimed.successor()).await.map_err(Outcome::Refused)?;
        }
        input.detach = None;
        Ok(claimed)
    }

    /// Detaches at the session before the running turn.
    async fn detach(&mut self, successor: Option<String>) -> Result<()> {
        self.sink
            .detach(&self.def, &self.session, &self.abort_tx, successor, &self.responder)
            .await
    }

    /// The run step: the turn, in this task, while the worker listens for
    /// inputs and a detach (attached) or for an abort (detached). `Err`
    /// when the run ends before the turn does; the turn is dropped first.
    async fn run_turn(
        &mut self,
        input: AgentInput,
        claimed: Claimed,
        lent: bool,
        span: tracing::Span,
    ) -> std::result::Result<TurnResult, Outcome> {
        let successor = claimed.successor();
        let session = if lent {
            self.session.lend_state()
        } else {
            self.session.clone()
        };
        // The claim key names the state as loaded; later turns start from
        // other state.
        self.session.state_claim = None;
        let (def, context, responder) = (Arc::clone(&self.def), Arc::clone(&self.context), self.responder.clone());
        let mut task = Box::pin(execute::turn(def, session, input, responder, context, claimed, span));
        loop {
            // The turn first: one that completes without waiting (an
            // in-memory store, a scripted model) never polls the other
            // branches.
            let listening = self.inbox.is_open() && !self.sink.is_detached();
            let detached = self.sink.is_detached();
            let aborted = tokio::select! {
                biased;
                result = &mut task => return Ok(result),
                arrival = self.inbox.during_turn(), if listening => {
                    self.arrived(arrival, &successor).await.map_err(Outcome::Refused)?;
                    false
                }
                changed = self.abort_rx.changed(), if detached => changed.is_ok() && *self.abort_rx.borrow(),
            };
            if aborted {
                return Err(Outcome::Aborted);
            }
        }
    }

    /// Acts on what the caller sent mid-turn: a detach request detaches
    /// at the session before the turn (inputs were queued already).
    async fn arrived(&mut self, arrival: Arrival, successor: &Option<String>) -> Result<()> {
        match arrival {
            Arrival::Detach => self.detach(successor.clone()).await,
            Arrival::Queued | Arrival::Closed => Ok(()),
        }
    }

    /// The settle step of a turn that ended: handed to the sink, which
    /// persists and announces it (or keeps it for the pending row).
    async fn settle_done(&mut self, done: TurnDone) -> Outcome {
        let TurnDone {
            state,
            message,
            finish,
            hold,
            children,
        } = done;
        let finished = Finished {
            state,
            message: message.as_ref(),
            finish,
            hold,
            levels: Levels {
                children,
                parent: self.parent_turn(),
            },
        };
        if let Some(end) = self
            .sink
            .done(&self.def, &mut self.session, &self.responder, finished)
            .await
        {
            return end;
        }
        self.last_message = message;
        self.last_finish = finish;
        Outcome::Next
    }

    /// The settle step of a turn that failed: its hold confirmed, the
    /// session put back at the state to keep (the last seam, or the lent
    /// state read back), then the sink records the failure.
    async fn settle_failure(&mut self, failure: TurnFailure, lent: bool) -> Outcome {
        let TurnFailure {
            error,
            claimed,
            seam,
            hold,
            children,
        } = failure;
        let levels = Levels { children, parent: None };
        if let Some(hold) = &hold
            && let Err(e) = hold.confirm().await
        {
            // The claim is another process's now (or the store cannot
            // say): write nothing of this turn, and answer why.
            tracing::warn!(error = %error, "a resume failed after losing its claim");
            levels.write_children(&self.def).await;
            return Outcome::Refused(e);
        }
        let kept_seam = seam.is_some();
        if let Some(state) = seam {
            self.session.state = *state;
        } else if lent && claimed && !write::restore_lent(&self.def, &mut self.session).await {
            // The session as it was cannot be read back: write no failed
            // snapshot rather than an emptied one.
            levels.write_children(&self.def).await;
            return Outcome::Refused(error);
        }
        let record = claimed || kept_seam;
        self.sink
            .failed(&self.def, &mut self.session, error, hold.as_deref(), record, &levels)
            .await
    }

    /// The parent's turn this run's outcome row is handed to: a
    /// foreground sub-agent call's, for its one input.
    fn parent_turn(&self) -> Option<std::sync::Arc<HandedUp>> {
        self.parent.clone().filter(|_| self.inbox.is_drained())
    }
}
