//! Loading the session an `AgentInit` names (docs/reference.md §5, §6).

use serde_json::{Map, Value};

use super::io::{AgentInit, AgentInput};
use super::{ACTOR, Access, AgentDef, PRINCIPAL, principal_of};
use crate::approval::roles_of;
use crate::error::{Error, Result};
use crate::hold::actor_of;
use crate::session::{HoldApproval, SessionState, Snapshot, SnapshotStatus, check_session_id};

/// The session a connection works on: the committed state and the
/// snapshot it was last saved as.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub state: SessionState,
    pub snapshot_id: Option<String>,
    /// Who owns the session (stamped on every snapshot written).
    pub owner: Option<String>,
    /// When the loaded snapshot was written (how long a pause waited).
    pub saved_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The claim key of the client-held state it was loaded from (see
    /// [`StateCodec::claim_key`](crate::session::StateCodec::claim_key)).
    pub state_claim: Option<String>,
    /// Whether `snapshot_id` ends interrupted, and whether a resume (or a
    /// new message that abandoned its calls) had claimed it when it was
    /// read; [`Holds::InDoubt`] when a settlement checked its calls are
    /// in doubt.
    pub holds: Holds,
    /// Whether `snapshot_id` is known to be its session's latest snapshot
    /// (read by session id, or just written); `false` when unknown.
    pub latest: bool,
    /// The partial approvals the loaded snapshot recorded for its paused
    /// calls (docs/reference.md §10.7).
    pub approvals: Vec<HoldApproval>,
    /// Whether the answer this turn resumes with is a rule's timer's
    /// (`on_expire = "deny"`), not a person's: set only in process, by
    /// `Decisions::expire`, so no person's authority is checked (the
    /// agent's own process answers, as for an operator).
    pub by_timer: bool,
}

/// The paused calls of the snapshot a session continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// It did not end interrupted (or there is no snapshot).
    None,
    /// It ended interrupted and nothing claimed it: its calls wait for an
    /// answer. A resume answers them; a new message abandons them. Either
    /// claims the snapshot first, so exactly one of them acts on it.
    Open,
    /// It ended interrupted and a resume or an abandoning message claimed
    /// it before it was read: its calls are closed.
    Claimed,
    /// A resume claimed it and its claim lapsed with nothing written
    /// after: its calls are in doubt (docs/reference.md §8). Only a settlement, which
    /// checked that, loads a session this way ([`Holds::of`] never says
    /// so); its resume takes the lapsed claim over.
    InDoubt,
}

/// What a turn does with the paused calls of the snapshot its session
/// continues (docs/reference.md §6.6), and so which claim it makes before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnKind {
    /// Nothing to claim: a new message where no calls are paused (or
    /// nothing is stored).
    Fresh,
    /// A resume answering the paused calls: checked against the history,
    /// then claims the paused snapshot (or the client-held state, when
    /// state claims are recorded) first, exactly once.
    Resume,
    /// A resume settling calls in doubt ([`Holds::InDoubt`]): takes the
    /// lapsed claim over and marks its audit records `settles`.
    Settle,
    /// A new message on a stored snapshot that ended interrupted: it
    /// abandons the paused calls still open (claiming the snapshot as a
    /// resume would), or takes over the lapsed claim of an abandoning
    /// turn that died; refused while that claim is live.
    Abandon,
}

impl TurnKind {
    /// The kind of the turn `input` starts on `session`. A settlement
    /// needs a resume that answers the calls in doubt: `INVALID_ARGUMENT`
    /// otherwise, before anything is claimed.
    pub(crate) fn of(session: &Session, input: &AgentInput, stored: bool) -> Result<TurnKind> {
        let resumes = input.resume.as_ref().is_some_and(|r| !r.is_empty());
        match (session.holds, resumes) {
            (Holds::InDoubt, false) => Err(Error::InvalidArgument(
                "settling calls in doubt needs a resume that answers them".into(),
            )),
            (Holds::InDoubt, true) => Ok(TurnKind::Settle),
            (_, true) => Ok(TurnKind::Resume),
            (Holds::Open | Holds::Claimed, false)
                if stored && session.snapshot_id.is_some() && input.message.is_some() =>
            {
                Ok(TurnKind::Abandon)
            }
            (_, false) => Ok(TurnKind::Fresh),
        }
    }
}

impl Holds {
    /// The holds of `snapshot` as read now.
    pub(crate) fn of(snapshot: &Snapshot) -> Holds {
        if snapshot.status != SnapshotStatus::Completed
            || snapshot.finish_reason != Some(crate::model::FinishReason::Interrupted)
        {
            Holds::None
        } else if snapshot.resumed_at.is_none() {
            Holds::Open
        } else {
            Holds::Claimed
        }
    }
}

impl Session {
    /// A copy of the session that takes its state, leaving this one with
    /// the session id and artifacts only (what a run's output reports).
    pub(crate) fn lend_state(&mut self) -> Session {
        let shell = SessionState {
            artifacts: self.state.artifacts.clone(),
            ..SessionState::new(self.state.session_id.clone())
        };
        Session {
            state: std::mem::replace(&mut self.state, shell),
            snapshot_id: self.snapshot_id.clone(),
            owner: self.owner.clone(),
            saved_at: self.saved_at,
            state_claim: self.state_claim.clone(),
            holds: self.holds,
            latest: self.latest,
            approvals: self.approvals.clone(),
            by_timer: self.by_timer,
        }
    }
}

/// The session of a snapshot read already (a sub-agent's, read by its
/// parent's claim), under the same checks as a snapshot loaded by id.
pub(crate) fn from_read(def: &AgentDef, snapshot: Snapshot, principal: Option<&str>) -> Result<Session> {
    if !(snapshot.visible_to(principal) && snapshot.belongs_to(&def.name)) {
        return Err(not_found(&snapshot.snapshot_id));
    }
    loaded(def, snapshot, principal)
}

fn not_found(snapshot_id: &str) -> Error {
    Error::NotFound(format!("snapshot {snapshot_id} not found"))
}

fn fresh_session_id() -> String {
    crate::session::mint_id()
}

fn check_resumable(snapshot: &Snapshot) -> Result<()> {
    match snapshot.status {
        SnapshotStatus::Completed | SnapshotStatus::Failed | SnapshotStatus::Aborted => Ok(()),
        SnapshotStatus::Pending | SnapshotStatus::Aborting => Err(Error::FailedPrecondition(format!(
            "snapshot {} is {}: still running; wait for it to settle or abort it",
            snapshot.snapshot_id,
            snapshot.status.as_str()
        ))),
        SnapshotStatus::Expired => Err(Error::FailedPrecondition(format!(
            "snapshot {} expired while running (its worker stopped sending heartbeats); its calls are in doubt and must be settled by an operator",
            snapshot.snapshot_id
        ))),
    }
}

pub(crate) fn from_snapshot(snapshot: Snapshot, principal: Option<&str>) -> Session {
    let holds = Holds::of(&snapshot);
    let state = snapshot
        .state
        .unwrap_or_else(|| SessionState::new(snapshot.session_id.clone()));
    let state = SessionState {
        session_id: snapshot.session_id,
        ..state
    };
    Session {
        state,
        snapshot_id: Some(snapshot.snapshot_id),
        owner: snapshot.owner.or_else(|| principal.map(str::to_owned)),
        saved_at: Some(snapshot.created_at),
        state_claim: None,
        holds,
        latest: false,
        approvals: snapshot.approvals,
        by_timer: false,
    }
}

/// The session of a snapshot the caller read from the agent's store, with
/// the checks [`load`] makes on a snapshot an init names: visible to
/// `principal` and written by this agent (see [`Snapshot::belongs_to`]),
/// else `NOT_FOUND` as for an unknown id.
pub(crate) fn loaded(def: &AgentDef, snapshot: Snapshot, principal: Option<&str>) -> Result<Session> {
    if def.store.is_none() {
        return Err(Error::FailedPrecondition(format!(
            "agent \"{}\" has no session store (client-managed state); send 'state' instead",
            def.name
        )));
    }
    if !snapshot.visible_to(principal) || !snapshot.belongs_to(&def.name) {
        return Err(Error::NotFound(format!("snapshot {} not found", snapshot.snapshot_id)));
    }
    check_resumable(&snapshot)?;
    Ok(from_snapshot(snapshot, principal))
}

/// Resolves `init` into a session, or the init error to report.
pub(crate) async fn load(def: &AgentDef, init: AgentInit, principal: Option<&str>) -> Result<Session> {
    match &def.store {
        None => client_held(def, init, principal),
        Some(store) => stored(def, store.as_ref(), init, principal).await,
    }
}

impl Session {
    /// A session with no stored snapshot yet (new, or client-held state),
    /// the latest of its conversation.
    fn unsaved(state: SessionState, owner: Option<&str>, state_claim: Option<String>) -> Session {
        Session {
            state,
            snapshot_id: None,
            owner: owner.map(str::to_owned),
            saved_at: None,
            state_claim,
            holds: Holds::None,
            latest: true,
            approvals: Vec::new(),
            by_timer: false,
        }
    }
}

/// `init` for an agent without a store: the state the client holds
/// (decoded and checked by the codec; its claim key kept), or a new one.
fn client_held(def: &AgentDef, init: AgentInit, principal: Option<&str>) -> Result<Session> {
    for (given, name) in [
        (init.session_id.is_some(), "sessionId"),
        (init.snapshot_id.is_some(), "snapshotId"),
    ] {
        if given {
            return Err(Error::FailedPrecondition(format!(
                "Cannot use '{name}' with agent \"{}\": it has no session store (client-managed state); send 'state' instead",
                def.name
            )));
        }
    }
    let Some(value) = init.state else {
        return Ok(Session::unsaved(SessionState::new(fresh_session_id()), principal, None));
    };
    let key = def.codec.claim_key(&value);
    let mut state = def.codec.decode(value)?;
    if state.session_id.is_empty() {
        state.session_id = fresh_session_id();
    }
    check_session_id(&state.session_id)?;
    Ok(Session::unsaved(state, principal, key))
}

/// `init` for an agent with a store: the snapshot it names, the latest
/// of the session it names (or that session, new), or a new session.
async fn stored(
    def: &AgentDef,
    store: &dyn crate::session::SessionStore,
    init: AgentInit,
    principal: Option<&str>,
) -> Result<Session> {
    if init.state.is_some() {
        return Err(Error::FailedPrecondition(format!(
            "Cannot send 'state' to agent \"{}\": it keeps sessions in a store; send 'snapshotId' or 'sessionId'",
            def.name
        )));
    }
    if let Some(id) = &init.session_id {
        check_session_id(id)?;
    }
    if let Some(snapshot_id) = &init.snapshot_id {
        let snapshot = store
            .get_snapshot(snapshot_id)
            .await?
            .filter(|s| s.visible_to(principal) && s.belongs_to(&def.name))
            .ok_or_else(|| not_found(snapshot_id))?;
        if let Some(session_id) = &init.session_id
            && *session_id != snapshot.session_id
        {
            // The caller may see this snapshot (checked above), so naming
            // the mismatch reveals nothing; a snapshot it may not see was
            // already NOT_FOUND (docs/reference.md §5.2).
            return Err(Error::InvalidArgument(format!(
                "snapshot {snapshot_id} does not belong to session {session_id}"
            )));
        }
        return loaded(def, snapshot, principal);
    }
    let Some(session_id) = init.session_id else {
        return Ok(Session::unsaved(SessionState::new(fresh_session_id()), principal, None));
    };
    match store.get_latest_snapshot(&session_id).await? {
        // Another principal's or another agent's session (or a claim
        // marker) reads as unknown; it is not started afresh either,
        // which would write this agent's turn into it.
        Some(snapshot) if !snapshot.visible_to(principal) || !snapshot.belongs_to(&def.name) => {
            Err(Error::NotFound(format!("session {session_id} not found")))
        }
        Some(snapshot) => {
            let mut session = loaded(def, snapshot, principal)?;
            session.latest = true;
            Ok(session)
        }
        None => Ok(Session::unsaved(SessionState::new(session_id), principal, None)),
    }
}

/// Loads `init` for a run of `input` on behalf of the caller `context`
/// describes: as [`load`], and for a resume that names a held snapshot of
/// someone else's whose paused call the caller's roles may answer (an
/// approver editing a held call, or responding instead;
/// docs/reference.md §10.10), that snapshot. The turn then runs as the
/// session's owner with the caller as the actor; whether the caller may
/// give each answer is decided before the claim (`decide.rs`), so an
/// approver can never abandon, restart or answer another call here.
pub(crate) async fn load_for(
    def: &AgentDef,
    init: AgentInit,
    mut context: Map<String, Value>,
    input: &AgentInput,
) -> Result<(Session, Map<String, Value>)> {
    let snapshot_id = init.snapshot_id.clone();
    let refused = match load(def, init, principal_of(&context)).await {
        Err(Error::NotFound(m)) => m,
        other => return other.map(|s| (s, context)),
    };
    let answers_only = input.message.is_none() && input.resume.as_ref().is_some_and(|r| !r.is_empty());
    let roles = roles_of(&context);
    let (Some(id), Some(store), true, false) = (snapshot_id, &def.store, answers_only, roles.is_empty()) else {
        return Err(Error::NotFound(refused));
    };
    let access = Access::of(&context, &roles);
    let snapshot = store
        .get_snapshot(&id)
        .await?
        .filter(|s| s.belongs_to(&def.name) && s.is_waiting() && access.sees(s))
        .ok_or(Error::NotFound(refused))?;
    check_resumable(&snapshot)?;
    let owner = snapshot.owner.clone();
    let session = from_snapshot(snapshot, None);
    if let Some(actor) = actor_of(&context).map(str::to_owned) {
        context.insert(ACTOR.to_owned(), Value::String(actor));
    }
    match owner {
        Some(owner) => context.insert(PRINCIPAL.to_owned(), Value::String(owner)),
        None => context.remove(PRINCIPAL),
    };
    Ok((session, context))
}
