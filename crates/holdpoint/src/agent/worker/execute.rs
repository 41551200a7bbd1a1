//! The run step of a turn: the handler, renewing the turn's claim while it
//! works, with a panic caught as a failed turn.
//!
//! Invariant: the turn runs inside the worker's task (no spawn per turn),
//! so a resume's cost stays one task's; a panic in a tool or handler
//! becomes a failed turn instead of a lost worker.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::super::AgentDef;
use super::super::handoff::{self, HandedUp};
use super::super::hold::Hold;
use super::super::io::AgentInput;
use super::super::load::Session;
use super::super::turn::{Responder, Turn};
use super::claim::Claimed;
use crate::error::Error;
use crate::message::Message;
use crate::model::FinishReason;
use crate::session::SessionState;

/// A turn that ended: its state, last message and finish reason, and the
/// turn's hold on its claim (confirmed before the outcome is written).
pub(super) struct TurnDone {
    pub state: SessionState,
    /// `None`: the last model message of `state` (see `Turn::into_parts`).
    pub message: Option<Message>,
    pub finish: FinishReason,
    pub hold: Option<Box<Hold>>,
    /// The rows its sub-agent calls handed up, written with its own.
    pub children: Option<Arc<HandedUp>>,
}

/// A turn that failed.
pub(super) struct TurnFailure {
    pub error: Error,
    /// The turn had claimed its resume (a panic reports `false`).
    pub claimed: bool,
    /// The state at the turn's last seam, when tools already ran.
    pub seam: Option<Box<SessionState>>,
    /// The turn's hold on its claim, to confirm before writing anything.
    pub hold: Option<Box<Hold>>,
    /// The rows its sub-agent calls handed up, written with its own.
    pub children: Option<Arc<HandedUp>>,
}

/// How a turn ended.
pub(super) type TurnResult = std::result::Result<TurnDone, TurnFailure>;

/// The turn `input` starts on `session` after its claim (see
/// [`claim`](super::claim::claim)), as a future that never panics: a
/// panic ends it as a failed turn that claimed nothing.
pub(super) fn turn(
    def: Arc<AgentDef>,
    session: Session,
    input: AgentInput,
    responder: Responder,
    context: Arc<Map<String, Value>>,
    claimed: Claimed,
    span: tracing::Span,
) -> impl Future<Output = TurnResult> + Send {
    AssertUnwindSafe(run_turn(def, session, input, responder, context, claimed).instrument(span))
        .catch_unwind()
        .map(|joined| joined.unwrap_or_else(|panic| Err(panicked(&*panic))))
}

fn panicked(panic: &(dyn std::any::Any + Send)) -> TurnFailure {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    TurnFailure {
        error: Error::Internal(format!("the turn panicked: {message}")),
        claimed: false,
        seam: None,
        hold: None,
        children: None,
    }
}

/// Runs the handler on one turn, renewing its claim while it works.
async fn run_turn(
    def: Arc<AgentDef>,
    session: Session,
    input: AgentInput,
    responder: Responder,
    context: Arc<Map<String, Value>>,
    Claimed { claimed, hold, nested }: Claimed,
) -> TurnResult {
    let receipts = def.receipts.as_ref().map(|issuer| {
        Arc::new(crate::receipt::TurnReceipts {
            issuer: Arc::clone(issuer),
            agent: def.name.clone(),
            snapshot_id: session.snapshot_id.clone(),
            approvals: session.approvals.clone(),
        })
    });
    let turn = Turn::new(input, session.state, responder, context).with_receipts(receipts);
    let work = def.handler.handle(turn.clone());
    // Every turn scopes its own collector (none for an agent without
    // sub-agent tools or a store), so a child never hands its rows to a
    // turn other than its parent's.
    let children = match &def.store {
        Some(store) if def.nesting.collects(&def) => Some(HandedUp::new(Arc::clone(store), nested)),
        _ => None,
    };
    let work = handoff::collecting(children.clone(), work);
    let done = match &hold {
        Some(hold) => while_renewing(work, hold.keep()).await,
        None => work.await,
    };
    match done {
        Ok(()) => {
            let (state, message, finish) = turn.into_parts();
            Ok(TurnDone {
                state,
                message,
                finish,
                hold,
                children,
            })
        }
        Err(error) => Err(TurnFailure {
            error,
            claimed,
            seam: turn.seam_state().map(Box::new),
            hold,
            children,
        }),
    }
}

/// Runs `work` while `renew` keeps the claim alive, both polled in this
/// task. If renewing stops (the claim was taken over), the turn still
/// finishes; its outcome is then not written (see [`Hold::confirm`]).
async fn while_renewing<T>(work: impl Future<Output = T>, renew: impl Future<Output = ()>) -> T {
    tokio::pin!(work);
    tokio::pin!(renew);
    tokio::select! {
        biased;
        out = &mut work => out,
        () = &mut renew => work.await,
    }
}
