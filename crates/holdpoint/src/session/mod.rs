//! Sessions: snapshots, the store trait, the in-memory store, custom-state
//! patches and the codec of client-held state (SPEC §5).

mod codec;
mod memory;
pub mod patch;
mod snapshot;
mod store;

pub use codec::{JsonStateCodec, StateCodec};
pub use memory::InMemoryStore;
pub use snapshot::{
    Artifact, HEARTBEAT_EXPIRY, MAX_SESSION_ID_LEN, SessionState, Snapshot, SnapshotStatus, check_session_id,
    upsert_artifact,
};
pub use store::{SessionStore, SnapshotUpdate, mint_id, prepare_row};
