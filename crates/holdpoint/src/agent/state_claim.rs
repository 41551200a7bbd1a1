//! One-time claims of client-held state (SPEC §9.4): a resume from signed
//! state records a marker snapshot before any tool runs, so the same state
//! cannot answer its interrupts twice.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::session::{SessionState, SessionStore, Snapshot};

use crate::session::STATE_CLAIM_PREFIX as PREFIX;

/// Saves the marker `state-claim:KEY`, or fails with `ABORTED` ("already
/// resumed") when it exists. The marker holds no conversation.
pub(crate) async fn claim(store: &Arc<dyn SessionStore>, key: &str, agent: &str, session_id: &str) -> Result<()> {
    let id = format!("{PREFIX}{key}");
    let mut marker = Snapshot::new(SessionState::new(session_id));
    marker.state = None;
    marker.agent = Some(agent.to_owned());
    marker.resumed_at = Some(marker.created_at);
    let mut meta = Map::new();
    meta.insert("stateClaim".into(), Value::Bool(true));
    marker.metadata = Some(meta);
    let taken = id.clone();
    store
        .save_snapshot(
            Some(&id),
            Box::new(move |existing| match existing {
                Some(_) => Err(Error::AlreadyResumed(taken)),
                None => Ok(Some(marker)),
            }),
        )
        .await?;
    Ok(())
}
