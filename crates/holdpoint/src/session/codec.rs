//! `StateCodec`: how client-held state leaves and re-enters an agent. The
//! server plugs in a signing codec; the default is plain JSON.

use serde_json::Value;

use super::audit::hash_json;
use super::snapshot::SessionState;
use crate::error::{Error, Result};

/// Encodes outbound client-held state and decodes (and checks) inbound state.
pub trait StateCodec: Send + Sync {
    /// The JSON the caller receives as `AgentOutput.state`.
    fn encode(&self, state: &SessionState) -> Result<Value>;
    /// The state from `AgentInit.state`; reject anything not trusted.
    fn decode(&self, value: Value) -> Result<SessionState>;

    /// A key naming this exact inbound state, for the one-time claim of the
    /// interrupts a resume from it answers (docs/reference.md §9; see
    /// [`Agent::with_state_claims`](crate::agent::Agent::with_state_claims)).
    /// Called before [`decode`](Self::decode) and used only when `decode`
    /// accepts the value, so it must name what `decode` checks (the signing
    /// codec returns its MAC).
    ///
    /// The default is [`hash_json`] of the value: SHA-256 of its canonical
    /// JSON, so the same state re-serialised (keys in another order,
    /// `500.0` for `500`) has the same key and a replay of it is refused.
    /// A codec overrides it when another part of the value names what it
    /// checks. `None` opts the state out of claims (a replay then runs
    /// its calls again); no codec of this crate returns it.
    fn claim_key(&self, value: &Value) -> Option<String> {
        Some(hash_json(value))
    }
}

/// Plain JSON state, unsigned: the state is trusted as sent. Its claim key
/// is the default, the hash of the state's canonical JSON: with
/// [`Agent::with_state_claims`](crate::agent::Agent::with_state_claims),
/// resuming the same state twice is refused in process as over HTTP. A
/// caller that edits the state gets a new key; unsigned state cannot stop
/// a caller from forging state, only a replay from running calls twice.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonStateCodec;

impl StateCodec for JsonStateCodec {
    fn encode(&self, state: &SessionState) -> Result<Value> {
        serde_json::to_value(state).map_err(|e| Error::Internal(format!("state does not serialise: {e}")))
    }

    fn decode(&self, value: Value) -> Result<SessionState> {
        serde_json::from_value(value).map_err(|e| Error::InvalidArgument(format!("invalid state: {e}")))
    }
}
