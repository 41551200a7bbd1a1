//! The worker behind a connection: takes inputs one at a time, runs each
//! turn, persists it, then announces it (docs/reference.md §5, §7, §7.3).
//!
//! Each input goes one way (`Worker::handle`, below): claim (the
//! exactly-once step, `claim.rs`) → run (the handler in this task,
//! `execute.rs`) → settle (the outcome written and announced through the
//! run's [`Sink`], `sink.rs`), ending in one [`Outcome`]. Inputs and
//! detach requests come through the [`Inbox`]; what a turn produces goes
//! to the sink of the run's mode (attached to the caller, or detached into
//! a pending row).
//!
//! Invariants:
//! - One turn runs at a time, in input order; a turn is persisted before
//!   it is announced; a run ends exactly once, through its sink.
//! - A resume claims first, before any detach and before its turn starts
//!   (so before a detach can arrive mid-turn): a refused resume (already
//!   resumed, a bad answer) is answered as such and leaves no pending row
//!   behind, which would otherwise become the session's latest with the
//!   paused calls still open in it, resumable a second time.
//! - `Worker::session` stays the session before the turn until the turn
//!   is settled; a detach mid-turn writes its pending row from it.
//! - Nothing of a turn whose claim was taken over is written.

mod claim;
mod execute;
mod inbox;
mod sink;

pub(crate) use crate::hold::actor_of;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;

use super::AgentDef;
use super::handoff::HandedUp;
use super::io::{AgentInput, AgentOutput, AgentStreamChunk, TurnStart};
use super::load::Session;
use super::turn::{Responder, last_model};
use crate::error::{Error, Result};
use crate::message::{Message, Role};
use crate::model::FinishReason;
use crate::session::SessionState;
use claim::Claimed;
use execute::{TurnDone, TurnFailure, TurnResult};
use inbox::{Arrival, Inbox};
use sink::{Finished, Levels, Sink};

/// The worker's ends of the connection's channels.
pub(crate) struct WorkerIo {
    /// Where later inputs arrive; `None` when there are none (a single run).
    pub inputs: Option<mpsc::UnboundedReceiver<AgentInput>>,
    /// An input to handle before any from `inputs`.
    pub first: Option<AgentInput>,
    pub responder: Responder,
    pub output: Option<oneshot::Sender<Result<AgentOutput>>>,
    pub ended: Arc<AtomicBool>,
    /// A foreground sub-agent call's parent turn, which writes this run's
    /// outcome row with its own.
    pub parent: Option<Arc<HandedUp>>,
}

/// How one input ended, for the worker's loop.
pub(super) enum Outcome {
    /// The input was handled (its turn settled, or it only detached): the
    /// next one may run.
    Next,
    /// The run ends failed with the error: told to the caller, or
    /// recorded in a detached run's pending row.
    Failed(Error),
    /// The run ends failed with the error told to the caller only; a
    /// detached run's pending row is not written (the claim is another
    /// process's, or the state to keep cannot be read back).
    Refused(Error),
    /// An abort was requested on the detached run's pending row.
    Aborted,
    /// A detached resume finished after its claim was taken over: the
    /// settlement owns the pending row; nothing is written.
    Lost,
}

/// A worker's state between inputs.
struct Worker {
    def: Arc<AgentDef>,
    /// The session as of the last settled turn.
    session: Session,
    context: Arc<Map<String, Value>>,
    responder: Responder,
    inbox: Inbox,
    sink: Sink,
    /// Set to `true` once an abort is requested on a detached run's row.
    abort_tx: watch::Sender<bool>,
    abort_rx: watch::Receiver<bool>,
    /// The last settled turn's message and finish (the run's output); a
    /// `None` message stands for the session state's last model message
    /// (see `Turn::into_parts`).
    last_message: Option<Message>,
    last_finish: FinishReason,
    /// How many turns started on this connection (the next `turnStart`'s
    /// index).
    turns: u32,
    /// Where this run's outcome row goes when it is a foreground sub-agent
    /// call (see [`WorkerIo::parent`]).
    parent: Option<Arc<HandedUp>>,
}

/// A worker's whole run, as a future to drive or spawn.
pub(crate) type WorkerFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A worker for one input with nobody listening to chunks: the future to
/// drive, and where its output arrives. `Agent::run` drives it in the
/// caller's task and only spawns what is left after a detach.
pub(crate) fn single(
    def: Arc<AgentDef>,
    session: Session,
    context: Arc<Map<String, Value>>,
    input: AgentInput,
    parent: Option<Arc<HandedUp>>,
) -> (WorkerFuture, oneshot::Receiver<Result<AgentOutput>>) {
    let (output_tx, output_rx) = oneshot::channel();
    let io = WorkerIo {
        inputs: None,
        first: Some(input),
        responder: Responder::disconnected(),
        output: Some(output_tx),
        ended: Arc::new(AtomicBool::new(false)),
        parent,
    };
    (Box::pin(run(def, session, context, io)), output_rx)
}

/// Runs the worker until its inputs end, it fails, or it is aborted.
pub(crate) async fn run(def: Arc<AgentDef>, session: Session, context: Arc<Map<String, Value>>, io: WorkerIo) {
    let WorkerIo {
        inputs,
        first,
        responder,
        output,
        ended,
        parent,
    } = io;
    let (abort_tx, abort_rx) = watch::channel(false);
    let span = tracing::info_span!("agent", agent = %def.name, session_id = %session.state.session_id);
    let worker = Worker {
        def,
        session,
        context,
        responder,
        inbox: Inbox::new(first, inputs),
        sink: Sink::attached(output, ended),
        abort_tx,
        abort_rx,
        last_message: None,
        last_finish: FinishReason::Stop,
        turns: 0,
        parent,
    };
    worker.run().instrument(span).await;
}

impl Worker {
    async fn run(mut self) {
        while let Some(input) = self.inbox.next(self.sink.is_detached()).await {
            match self.handle(input).await {
                Outcome::Next => {}
                end => return self.end(end).await,
            }
        }
        let Worker {
            def,
            session,
            sink,
            last_message,
            last_finish,
            ..
        } = self;
        sink.finish(&def, session, last_message, last_finish).await;
    }

    /// Ends the run early, as `outcome` says.
    async fn end(self, outcome: Outcome) {
        let Worker {
            def,
            session,
            responder,
            sink,
            ..
        } = self;
        match outcome {
            Outcome::Next | Outcome::Lost => {}
            Outcome::Failed(error) => sink.fail(&def, &session, &responder, error).await,
            Outcome::Refused(error) => sink.refuse(&def, &session, &responder, error),
            Outcome::Aborted => sink.abort(&session).await,
        }
    }
}

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
        // back from the store (see `sink::restore_lent`).
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
        let parent = self.parent_turn();
        // A row handed up to the parent takes the conversation with it:
        // the output message is copied out of it first.
        let message = match message {
            None if parent.is_some() => last_model(&state.messages).cloned(),
            message => message,
        };
        let finished = Finished {
            state,
            message: message.as_ref(),
            finish,
            hold,
            levels: Levels { children, parent },
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
        } else if lent && claimed && !sink::restore_lent(&self.def, &mut self.session).await {
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
