//! The worker behind a connection: takes inputs one at a time, runs each
//! turn, persists it, then announces it (docs/reference.md §5, §7, §7.3).
//!
//! Each input goes through one pipeline (`pipeline.rs`): claim (the
//! exactly-once step, `claim.rs`) → run (the handler in this task,
//! `execute.rs`) → settle (the outcome written, `write.rs`), ending in one
//! [`Outcome`]. Inputs and detach requests come through the [`Inbox`];
//! what a turn produces goes to the [`Sink`] of the run's mode (attached
//! to the caller, or detached into a pending row).
//!
//! Invariants: one turn runs at a time, in input order; a turn is
//! persisted before it is announced; a run ends exactly once, through its
//! sink.

mod claim;
mod execute;
mod inbox;
mod pipeline;
mod sink;
mod write;

pub(crate) use crate::hold::actor_of;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;

use super::AgentDef;
use super::handoff::HandedUp;
use super::io::{AgentInput, AgentOutput};
use super::load::Session;
use super::turn::Responder;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::model::FinishReason;
use inbox::Inbox;
use sink::Sink;

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
    /// The last settled turn's message and finish (the run's output).
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
        sink.finish(&def, &session, last_message, last_finish).await;
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
