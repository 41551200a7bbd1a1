//! One-time claims of client-held state (docs/reference.md §9): a resume from signed
//! state records a marker snapshot before any tool runs, so the same state
//! cannot answer its interrupts twice.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::session::{SessionState, SessionStore, Snapshot};

use crate::session::STATE_CLAIM_PREFIX as PREFIX;

/// Saves the marker `state-claim:KEY`, or fails with `ABORTED` ("the
/// client-held state of session ID was already resumed", naming the
/// state's session, never the marker) when it exists. The marker holds no conversation, and is the
/// only row of a session of its own (its id): the client names the state's
/// session id, so a marker in that session could become the latest row of
/// a server-managed session of the same id on a shared store, hiding its
/// paused calls. The state's session id is kept in the metadata.
pub(crate) async fn claim(store: &Arc<dyn SessionStore>, key: &str, agent: &str, session_id: &str) -> Result<()> {
    let id = format!("{PREFIX}{key}");
    let mut marker = Snapshot::new(SessionState::new(id.clone()));
    marker.state = None;
    marker.agent = Some(agent.to_owned());
    marker.resumed_at = Some(marker.created_at);
    let mut meta = Map::new();
    meta.insert("stateClaim".into(), Value::Bool(true));
    meta.insert("sessionId".into(), Value::String(session_id.to_owned()));
    marker.metadata = Some(meta);
    // The caller sent state, not the marker: the refusal names the state's
    // session.
    let taken = format!(
        "the client-held state of session {session_id} was already resumed: its paused calls are answered once (continue from the state that answer returned)"
    );
    store
        .save_snapshot(
            Some(&id),
            Box::new(move |existing| match existing {
                Some(_) => Err(Error::AlreadyAnswered(taken)),
                None => Ok(Some(marker)),
            }),
        )
        .await?;
    Ok(())
}
