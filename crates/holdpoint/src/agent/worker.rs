//! The worker behind a connection: takes inputs one at a time, runs each
//! turn, persists it, then announces it (SPEC §4, §9.1, §9.2).

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;

use super::audit::{self, AuditContext};
use super::detach::{self, Detached};
use super::hold::Hold;
use super::io::{AgentInput, AgentOutput, AgentStreamChunk, TurnEnd};
use super::load::{Holds, Session};
use super::turn::{Responder, Turn};
use super::{AgentDef, principal_of};
use crate::error::{Error, Result};
use crate::generate::{Resume, validate_resume};
use crate::message::{Message, Role};
use crate::model::{FinishReason, GenerateChunk};
use crate::session::{ResumeClaim, SessionState, Snapshot, SnapshotStatus};

/// The worker's ends of the connection's channels.
pub(crate) struct WorkerIo {
    /// Where later inputs arrive; `None` when there are none (a single run).
    pub inputs: Option<mpsc::UnboundedReceiver<AgentInput>>,
    /// An input to handle before any from `inputs`.
    pub first: Option<AgentInput>,
    pub responder: Responder,
    pub output: Option<oneshot::Sender<Result<AgentOutput>>>,
    pub ended: Arc<AtomicBool>,
}

struct TurnFailure {
    error: Error,
    claimed: bool,
    /// The state at the turn's last seam, when tools already ran.
    seam: Option<Box<SessionState>>,
    /// The resume's hold on its claim, to confirm before writing anything.
    hold: Option<Box<Hold>>,
}

/// A turn that ended: its state, last message and finish reason, and the
/// resume's hold on its claim (confirmed before the outcome is written).
struct TurnDone {
    state: SessionState,
    message: Option<Message>,
    finish: FinishReason,
    hold: Option<Box<Hold>>,
}

type TurnResult = std::result::Result<TurnDone, TurnFailure>;

impl WorkerIo {
    fn send_output(&mut self, output: Result<AgentOutput>) {
        self.ended.store(true, Ordering::SeqCst);
        if let Some(tx) = self.output.take() {
            // The caller may have dropped the connection; the run still counts.
            let _ = tx.send(output);
        }
    }
}

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
        failure: error.map(super::FailureReason::of),
        held_for: None,
    })
}

/// What a turn's resume claimed before its tools run: `claimed` once the
/// store recorded a claim on the paused snapshot (or on client-held
/// state), and the hold on a stored claim.
#[derive(Default)]
struct Claimed {
    claimed: bool,
    hold: Option<Box<Hold>>,
}

/// The exactly-once step of a turn that resumes (SPEC §9.1): checks the
/// resume against the history, audits its decisions and claims the paused
/// snapshot (or the client-held state) in the store. Nothing to do for a
/// turn without a resume. Fails with what the caller should hear; nothing
/// was claimed then.
async fn claim_resume_of(
    def: &AgentDef,
    session: &Session,
    input: &AgentInput,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    if session.settle && input.resume.as_ref().is_none_or(Resume::is_empty) {
        return Err(Error::InvalidArgument(
            "settling calls in doubt needs a resume that answers them".into(),
        ));
    }
    let Some(resume) = input.resume.as_ref().filter(|r| !r.is_empty()) else {
        return abandon_holds(def, session, input, context).await;
    };
    validate_resume(&session.state.messages, resume)?;
    if let (Some(store), Some(id)) = (&def.store, &session.snapshot_id) {
        if session.holds == Holds::Open
            && !session.latest
            && let Some(latest) = store.get_latest_snapshot(&session.state.session_id).await?
            && latest.snapshot_id != *id
        {
            // Its session went on without answering (a branch from an
            // earlier snapshot, or rows written before new messages
            // abandoned paused calls): answering now would fork it.
            return Err(Error::Aborted(format!(
                "snapshot {id} was left behind: its session went on (snapshot {} follows it) without answering its paused calls, so they can no longer be answered",
                latest.snapshot_id
            )));
        }
        let ctx = AuditContext {
            principal: principal_of(context),
            actor: context.get(super::ACTOR).and_then(Value::as_str),
            agent: &def.name,
            session_id: &session.state.session_id,
            snapshot_id: id,
        };
        let mut records = audit::records(&ctx, &session.state.messages, resume);
        for r in &mut records {
            r.settles = session.settle;
        }
        let waited_ms = session
            .saved_at
            .map(|t| (chrono::Utc::now() - t).num_milliseconds())
            .unwrap_or(0);
        let span = tracing::info_span!(
            "resume_decision",
            snapshot_id = %id,
            decisions = records.len(),
            waited_ms,
            settles = session.settle
        );
        for r in &records {
            tracing::info!(
                parent: &span,
                tool = %r.tool,
                r#ref = r.reference.as_deref().unwrap_or(""),
                decision = r.decision.as_str(),
                principal = r.principal.as_deref().unwrap_or(""),
                "interrupt answered"
            );
        }
        let mut claim = ResumeClaim::new(id.clone()).lease(def.resume_lease);
        if session.settle {
            claim = claim.takeover();
        }
        let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
        if let Err(refused) = store.claim_resume(claim, records).instrument(span).await {
            let sid = &session.state.session_id;
            return Err(audit::explain_refused(store.as_ref(), &def.name, sid, id, refused).await);
        }
        return Ok(Claimed {
            claimed: true,
            hold: Some(Box::new(hold)),
        });
    }
    if let (Some(claims), Some(key)) = (&def.claims, &session.state_claim) {
        // Client-held state: claim the state itself (SPEC §9.4).
        let span = tracing::info_span!("resume_decision", state_claim = %key);
        super::state_claim::claim(claims, key, &def.name, &session.state.session_id)
            .instrument(span)
            .await?;
    }
    Ok(Claimed::default())
}

/// The exactly-once step of a turn that brings a new message to a session
/// whose snapshot ends interrupted: the message *abandons* the paused
/// calls. It claims the snapshot as a resume would (so of a new message
/// and a concurrent approval exactly one wins; the other is refused with
/// `ABORTED`) and records an `abandoned` audit decision per paused call;
/// a later resume of that snapshot is refused. A snapshot whose calls
/// were closed before it was read (answered, or abandoned) may be
/// branched from once the claim's outcome is written; while the claiming
/// turn still runs (it is the session's latest) the message is refused,
/// unless that turn was an abandoning message whose claim lapsed (its
/// process died): then this message takes the claim over.
async fn abandon_holds(
    def: &AgentDef,
    session: &Session,
    input: &AgentInput,
    context: &Map<String, Value>,
) -> Result<Claimed> {
    let (Some(store), Some(id)) = (&def.store, &session.snapshot_id) else {
        return Ok(Claimed::default());
    };
    if input.message.is_none() {
        return Ok(Claimed::default());
    }
    let sid = &session.state.session_id;
    match session.holds {
        Holds::None => Ok(Claimed::default()),
        Holds::Claimed => {
            let Some(latest) = store.get_latest_snapshot(sid).await?.filter(|l| l.snapshot_id == *id) else {
                return Ok(Claimed::default());
            };
            // An abandoning turn whose process died (its claim lapsed and
            // nothing follows) would leave the session stuck: its calls are
            // not in doubt (they never run), so nobody settles them. A new
            // message takes that claim over, so that a frozen turn waking up
            // later writes nothing (see `Hold`).
            let abandoned = audit::abandoned_at(store.as_ref(), &def.name, sid, id).await;
            if abandoned.is_some() && latest.resume_lapsed(chrono::Utc::now()) {
                let claim = ResumeClaim::new(id.clone()).lease(def.resume_lease).takeover();
                let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
                store.claim_resume(claim, Vec::new()).await?;
                return Ok(Claimed {
                    claimed: true,
                    hold: Some(Box::new(hold)),
                });
            }
            let refused = Error::AlreadyResumed(id.clone());
            Err(audit::explain_refused(store.as_ref(), &def.name, sid, id, refused).await)
        }
        Holds::Open => {
            let ctx = AuditContext {
                principal: principal_of(context),
                actor: context.get(super::ACTOR).and_then(Value::as_str),
                agent: &def.name,
                session_id: sid,
                snapshot_id: id,
            };
            let records = audit::abandoned(&ctx, &session.state.messages);
            let span = tracing::info_span!("abandon_holds", snapshot_id = %id, calls = records.len());
            for r in &records {
                tracing::info!(
                    parent: &span,
                    tool = %r.tool,
                    r#ref = r.reference.as_deref().unwrap_or(""),
                    "paused call abandoned by a new message"
                );
            }
            let claim = ResumeClaim::new(id.clone()).lease(def.resume_lease);
            let hold = Hold::new(Arc::clone(store), &claim, def.resume_lease);
            if let Err(refused) = store.claim_resume(claim, records).instrument(span).await {
                return Err(audit::explain_refused(store.as_ref(), &def.name, sid, id, refused).await);
            }
            Ok(Claimed {
                claimed: true,
                hold: Some(Box::new(hold)),
            })
        }
    }
}

/// Runs one turn whose resume was claimed (see [`claim_resume_of`]): the
/// handler, renewing the claim while it works.
async fn run_turn(
    def: Arc<AgentDef>,
    session: Session,
    input: AgentInput,
    responder: Responder,
    context: Arc<Map<String, Value>>,
    Claimed { claimed, hold }: Claimed,
) -> TurnResult {
    let turn = Turn::new(input, session.state, responder, context);
    let work = def.handler.handle(turn.clone());
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
            })
        }
        Err(error) => Err(TurnFailure {
            error,
            claimed,
            seam: turn.seam_state().map(Box::new),
            hold,
        }),
    }
}

/// Runs `work` while `renew` keeps the resume's claim alive, both polled
/// in this task (no spawn: a resume's cost stays one task's). If renewing
/// stops (the claim was taken over), the turn still finishes; its outcome
/// is then not written (see [`Hold::confirm`]).
async fn while_renewing<T>(work: impl Future<Output = T>, renew: impl Future<Output = ()>) -> T {
    tokio::pin!(work);
    tokio::pin!(renew);
    tokio::select! {
        biased;
        out = &mut work => out,
        () = &mut renew => work.await,
    }
}

/// Writes the completed snapshot of a turn (server-managed agents); under
/// the claimed snapshot's successor id when the turn holds a claim (see
/// [`Hold`]).
async fn commit(
    def: &AgentDef,
    session: &mut Session,
    state: SessionState,
    finish: FinishReason,
    hold: Option<&Hold>,
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
    let saved = match hold {
        Some(hold) => hold.write_outcome(row).await?,
        None => store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await?
            .ok_or_else(|| Error::Internal("the turn's snapshot was not written".into()))?,
    };
    let state = saved.state.ok_or_else(|| {
        Error::Internal(format!(
            "the store wrote snapshot {} without its state",
            saved.snapshot_id
        ))
    })?;
    session.snapshot_id = Some(saved.snapshot_id);
    session.state = state;
    session.holds = if finish == FinishReason::Interrupted {
        Holds::Open
    } else {
        Holds::None
    };
    session.latest = true;
    Ok(())
}

/// After a turn failed past a claim or a seam: a `failed` child snapshot
/// holding the conversation up to its last completed tool round, so the
/// session can go on and nothing that ran is run again (under the claimed
/// snapshot's successor id when the turn holds a claim). Fails only when
/// that id was taken (the claim was taken over and its outcome written
/// first); other store errors are logged.
async fn record_failure(def: &AgentDef, session: &mut Session, error: &Error, hold: Option<&Hold>) -> Result<()> {
    let Some(store) = &def.store else { return Ok(()) };
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
        Err(e @ Error::FailedPrecondition(_)) if hold.is_some() => return Err(e),
        Err(e) => tracing::error!(error = %e, "could not record a failed turn"),
    }
    Ok(())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
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

struct Worker {
    def: Arc<AgentDef>,
    session: Session,
    context: Arc<Map<String, Value>>,
    io: WorkerIo,
    queue: VecDeque<AgentInput>,
    inputs_open: bool,
    detached: Option<Detached>,
    abort_tx: watch::Sender<bool>,
    abort_rx: watch::Receiver<bool>,
    last_message: Option<Message>,
    last_finish: FinishReason,
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
) -> (WorkerFuture, oneshot::Receiver<Result<AgentOutput>>) {
    let (output_tx, output_rx) = oneshot::channel();
    let io = WorkerIo {
        inputs: None,
        first: Some(input),
        responder: Responder::disconnected(),
        output: Some(output_tx),
        ended: Arc::new(AtomicBool::new(false)),
    };
    (Box::pin(run(def, session, context, io)), output_rx)
}

/// Runs the worker until its inputs end, it fails, or it is aborted.
pub(crate) async fn run(def: Arc<AgentDef>, session: Session, context: Arc<Map<String, Value>>, mut io: WorkerIo) {
    let (abort_tx, abort_rx) = watch::channel(false);
    let queue: VecDeque<AgentInput> = io.first.take().into_iter().collect();
    let inputs_open = io.inputs.is_some();
    let span = tracing::info_span!("agent", agent = %def.name, session_id = %session.state.session_id);
    let worker = Worker {
        def,
        session,
        context,
        io,
        queue,
        inputs_open,
        detached: None,
        abort_tx,
        abort_rx,
        last_message: None,
        last_finish: FinishReason::Stop,
    };
    worker.run().instrument(span).await;
}

/// The next input from `inputs`; `None` once they end (or when there are none).
async fn recv(inputs: &mut Option<mpsc::UnboundedReceiver<AgentInput>>) -> Option<AgentInput> {
    match inputs {
        Some(rx) => rx.recv().await,
        None => None,
    }
}

/// Puts the state a failed last turn borrowed back into `session`, read
/// from the snapshot it was loaded from. A session never saved had only
/// its id, which is what [`Session::lend_state`] left in place. False when
/// the read fails.
async fn restore_lent(def: &AgentDef, session: &mut Session) -> bool {
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

impl Worker {
    /// Whether no input can follow the current one (a single run).
    fn is_last_input(&self) -> bool {
        self.queue.is_empty() && !self.inputs_open && self.detached.is_none()
    }

    async fn next_input(&mut self) -> Option<AgentInput> {
        if let Some(i) = self.queue.pop_front() {
            return Some(i);
        }
        if !self.inputs_open || self.detached.is_some() {
            return None;
        }
        let next = recv(&mut self.io.inputs).await;
        if next.is_none() {
            self.inputs_open = false;
        }
        next
    }

    /// Detaches the caller: writes the pending row (under `successor`
    /// when given) and answers `detached` at once.
    async fn detach(&mut self, at: &Session, successor: Option<String>) -> Result<()> {
        let d = detach::begin(&self.def, at, self.abort_tx.clone(), successor).await?;
        self.io.responder.detach();
        let out = AgentOutput {
            session_id: at.state.session_id.clone(),
            snapshot_id: Some(d.id.clone()),
            finish_reason: FinishReason::Detached,
            message: None,
            artifacts: at.state.artifacts.clone(),
            state: None,
            error: None,
            failure: None,
            held_for: None,
        };
        self.io.send_output(Ok(out));
        self.detached = Some(d);
        Ok(())
    }

    /// Ends a detached run as failed with `error` (its pending row takes
    /// the session's state); `false` when the run is not detached.
    async fn fail_detached(&self, error: &Error) -> bool {
        let Some(d) = &self.detached else {
            return false;
        };
        d.finalize(
            SnapshotStatus::Failed,
            self.session.state.clone(),
            FinishReason::Failed,
            Some(error.body()),
        )
        .await;
        true
    }

    fn fail_attached(&mut self, error: Error) {
        tracing::warn!(error = %error, "turn failed");
        turn_end(
            &self.io.responder,
            FinishReason::Failed,
            self.session.snapshot_id.clone(),
        );
        let out = output(&self.def, &self.session, None, FinishReason::Failed, Some(&error));
        self.io.send_output(out);
    }

    async fn run(mut self) {
        while let Some(mut input) = self.next_input().await {
            // A resume claims first, before any detach and before its turn
            // starts (so before a detach can arrive mid-turn): a refused
            // resume (already resumed, a bad answer) is answered as such
            // and leaves no pending row behind, which would otherwise
            // become the session's latest with the paused calls still open
            // in it, resumable a second time.
            if input.is_detach() && self.detached.is_none() && self.def.store.is_none() {
                // Refused (detached runs need a store) before anything,
                // client-held state included, is claimed.
                let at = self.session.clone();
                if let Err(e) = self.detach(&at, None).await {
                    self.fail_attached(e);
                    return;
                }
            }
            let span = tracing::info_span!("turn");
            let claimed = if input.has_payload() {
                let claiming = claim_resume_of(&self.def, &self.session, &input, &self.context);
                match claiming.instrument(span.clone()).await {
                    Ok(claimed) => claimed,
                    Err(error) => {
                        if !self.fail_detached(&error).await {
                            self.fail_attached(error);
                        }
                        return;
                    }
                }
            } else {
                Claimed::default()
            };
            // A resume's pending row (if it detaches) follows the paused
            // snapshot under the id its outcome would take.
            let successor = claimed.hold.as_ref().map(|h| h.successor());
            if input.is_detach() && self.detached.is_none() {
                let at = self.session.clone();
                if let Err(e) = self.detach(&at, successor.clone()).await {
                    self.fail_attached(e);
                    return;
                }
            }
            input.detach = None;
            if !input.has_payload() {
                continue;
            }
            // `self.session` stays the session before the turn until it
            // ends. The last turn of a run with a store lends the state
            // instead of copying it: only a failure needs it again, and
            // then it is read back from the store (see `restore_lent`).
            let lent = self.is_last_input() && self.def.store.is_some();
            let session = if lent {
                self.session.lend_state()
            } else {
                self.session.clone()
            };
            // The claim key names the state as loaded; later turns start
            // from other state.
            self.session.state_claim = None;
            // The turn runs inside this task (no spawn per turn); a panic in
            // a tool or handler becomes a failed turn instead of a lost worker.
            let mut task = Box::pin(
                AssertUnwindSafe(
                    run_turn(
                        Arc::clone(&self.def),
                        session,
                        input,
                        self.io.responder.clone(),
                        Arc::clone(&self.context),
                        claimed,
                    )
                    .instrument(span),
                )
                .catch_unwind(),
            );
            let result: TurnResult = loop {
                // The turn first: one that completes without waiting (an
                // in-memory store, a scripted model) never polls the other
                // branches. Aborts exist only after a detach.
                tokio::select! {
                    biased;
                    joined = &mut task => {
                        break joined.unwrap_or_else(|panic| Err(TurnFailure {
                            error: Error::Internal(format!("the turn panicked: {}", panic_message(&*panic))),
                            claimed: false,
                            seam: None,
                            hold: None,
                        }));
                    }
                    next = recv(&mut self.io.inputs), if self.inputs_open && self.detached.is_none() => match next {
                        Some(mut i) if i.is_detach() => {
                            let before = self.session.clone();
                            if let Err(e) = self.detach(&before, successor.clone()).await {
                                drop(task);
                                self.fail_attached(e);
                                return;
                            }
                            i.detach = None;
                            if i.has_payload() {
                                self.queue.push_back(i);
                            }
                        }
                        Some(i) => self.queue.push_back(i),
                        None => self.inputs_open = false,
                    },
                    changed = self.abort_rx.changed(), if self.detached.is_some() => {
                        if changed.is_ok() && *self.abort_rx.borrow() {
                            drop(task);
                            if let Some(d) = &self.detached {
                                d.finalize(SnapshotStatus::Aborted, self.session.state.clone(), FinishReason::Aborted, None).await;
                            }
                            return;
                        }
                    }
                }
            };
            match result {
                Ok(TurnDone {
                    state,
                    message,
                    finish,
                    hold,
                }) => {
                    if self.detached.is_some() {
                        if let Some(hold) = &hold
                            && let Err(e) = hold.confirm().await
                        {
                            // Taken over while detached: the settlement owns
                            // the pending row now; write nothing.
                            tracing::warn!(error = %e, "a detached resume finished after its claim was taken over");
                            return;
                        }
                        self.session.state = state;
                    } else {
                        if let Some(hold) = &hold
                            && let Err(e) = hold.confirm().await
                        {
                            self.fail_attached(e);
                            return;
                        }
                        if let Err(e) = commit(&self.def, &mut self.session, state, finish, hold.as_deref()).await {
                            self.fail_attached(e);
                            return;
                        }
                        if finish == FinishReason::Interrupted
                            && let Some(m) = &message
                        {
                            for p in m.interrupts() {
                                tracing::info!(
                                    snapshot_id = self.session.snapshot_id.as_deref().unwrap_or(""),
                                    tool = p.as_tool_request().map(|r| r.name.as_str()).unwrap_or(""),
                                    held_by = p.interrupted_by().unwrap_or("tool"),
                                    "interrupt held"
                                );
                            }
                            if self.io.responder.is_attached() {
                                let parts: Vec<_> = m.interrupts().cloned().collect();
                                self.io
                                    .responder
                                    .send_model_chunk(GenerateChunk::new(Role::Tool, parts));
                            }
                        }
                        turn_end(&self.io.responder, finish, self.session.snapshot_id.clone());
                    }
                    self.last_message = message;
                    self.last_finish = finish;
                }
                Err(TurnFailure {
                    error,
                    claimed,
                    seam,
                    hold,
                }) => {
                    if let Some(hold) = &hold
                        && let Err(e) = hold.confirm().await
                    {
                        // The claim is another process's now (or the store
                        // cannot say): write nothing, and answer why.
                        tracing::warn!(error = %error, "a resume failed after losing its claim");
                        self.fail_attached(e);
                        return;
                    }
                    let kept_seam = seam.is_some();
                    if let Some(state) = seam {
                        self.session.state = *state;
                    } else if lent && claimed && !restore_lent(&self.def, &mut self.session).await {
                        // The session as it was cannot be read back: write
                        // no failed snapshot rather than an emptied one.
                        self.fail_attached(error);
                        return;
                    }
                    if self.fail_detached(&error).await {
                        return;
                    }
                    if (claimed || kept_seam)
                        && let Err(refused) =
                            record_failure(&self.def, &mut self.session, &error, hold.as_deref()).await
                    {
                        tracing::warn!(error = %error, "a resume failed after its claim was taken over");
                        self.fail_attached(refused);
                        return;
                    }
                    self.fail_attached(error);
                    return;
                }
            }
        }
        if let Some(d) = &self.detached {
            d.finalize(
                SnapshotStatus::Completed,
                self.session.state.clone(),
                self.last_finish,
                None,
            )
            .await;
            return;
        }
        let out = output(
            &self.def,
            &self.session,
            self.last_message.take(),
            self.last_finish,
            None,
        );
        self.io.send_output(out);
    }
}
