//! Loading the session an `AgentInit` names (SPEC §4, §5).

use super::AgentDef;
use super::io::AgentInit;
use crate::error::{Error, Result};
use crate::session::{SessionState, Snapshot, SnapshotStatus, check_session_id};

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
    /// The turn settles calls left in doubt: its resume takes over a
    /// lapsed claim instead of making a first one (SPEC §9.3).
    pub settle: bool,
    /// The claim key of the client-held state it was loaded from (see
    /// [`StateCodec::claim_key`](crate::session::StateCodec::claim_key)).
    pub state_claim: Option<String>,
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
            settle: self.settle,
            state_claim: self.state_claim.clone(),
        }
    }
}

fn fresh_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
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
        settle: false,
        state_claim: None,
    }
}

/// The session of a snapshot the caller read from the agent's store, with
/// the checks [`load`] makes on a snapshot an init names.
pub(crate) fn loaded(def: &AgentDef, snapshot: Snapshot, principal: Option<&str>) -> Result<Session> {
    if def.store.is_none() {
        return Err(Error::FailedPrecondition(format!(
            "agent \"{}\" has no session store (client-managed state); send 'state' instead",
            def.name
        )));
    }
    if !snapshot.visible_to(principal) {
        return Err(Error::NotFound(format!("snapshot {} not found", snapshot.snapshot_id)));
    }
    check_resumable(&snapshot)?;
    Ok(from_snapshot(snapshot, principal))
}

/// Resolves `init` into a session, or the init error to report.
pub(crate) async fn load(def: &AgentDef, init: AgentInit, principal: Option<&str>) -> Result<Session> {
    let owner = principal.map(str::to_owned);
    let Some(store) = &def.store else {
        if init.session_id.is_some() {
            return Err(Error::FailedPrecondition(format!(
                "Cannot use 'sessionId' with agent \"{}\": it has no session store (client-managed state); send 'state' instead",
                def.name
            )));
        }
        if init.snapshot_id.is_some() {
            return Err(Error::FailedPrecondition(format!(
                "Cannot use 'snapshotId' with agent \"{}\": it has no session store (client-managed state); send 'state' instead",
                def.name
            )));
        }
        let mut state_claim = None;
        let state = match init.state {
            Some(value) => {
                let key = def.codec.claim_key(&value);
                let mut state = def.codec.decode(value)?;
                state_claim = key;
                if state.session_id.is_empty() {
                    state.session_id = fresh_session_id();
                }
                check_session_id(&state.session_id)?;
                state
            }
            None => SessionState::new(fresh_session_id()),
        };
        return Ok(Session {
            state,
            snapshot_id: None,
            owner,
            saved_at: None,
            settle: false,
            state_claim,
        });
    };

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
            .filter(|s| s.visible_to(principal))
            .ok_or_else(|| Error::NotFound(format!("snapshot {snapshot_id} not found")))?;
        if let Some(session_id) = &init.session_id
            && *session_id != snapshot.session_id
        {
            // Same answer as a missing snapshot, so ids cannot be probed.
            return Err(Error::NotFound(format!(
                "snapshot {snapshot_id} not found in session {session_id}"
            )));
        }
        return loaded(def, snapshot, principal);
    }
    if let Some(session_id) = init.session_id {
        return match store.get_latest_snapshot(&session_id).await? {
            Some(snapshot) if !snapshot.visible_to(principal) => {
                Err(Error::NotFound(format!("session {session_id} not found")))
            }
            Some(snapshot) => loaded(def, snapshot, principal),
            None => Ok(Session {
                state: SessionState::new(session_id),
                snapshot_id: None,
                owner,
                saved_at: None,
                settle: false,
                state_claim: None,
            }),
        };
    }
    Ok(Session {
        state: SessionState::new(fresh_session_id()),
        snapshot_id: None,
        owner,
        saved_at: None,
        settle: false,
        state_claim: None,
    })
}
