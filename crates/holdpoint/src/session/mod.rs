//! Sessions: snapshots, the store trait, the in-memory store, custom-state
//! patches and the codec of client-held state (SPEC §5).

mod audit;
mod codec;
mod memory;
pub mod patch;
pub mod row;
mod snapshot;
mod store;

pub use audit::{AuditDecision, AuditQuery, AuditRecord, SnapshotQuery, canonical_json, hash_json};
pub use codec::{JsonStateCodec, StateCodec};
pub use memory::InMemoryStore;
pub use snapshot::{
    Artifact, HEARTBEAT_EXPIRY, MAX_SESSION_ID_LEN, STATE_CLAIM_PREFIX, SessionState, Snapshot, SnapshotStatus,
    check_session_id, upsert_artifact,
};
pub use store::{
    ResumeClaim, SessionStore, SnapshotUpdate, WaitingCount, apply_claim, apply_claim_to, claim_update,
    filter_snapshots, insert_refused, insert_update, lease_end, mint_id, prepare_row, renew_claim_update, successor_id,
};
