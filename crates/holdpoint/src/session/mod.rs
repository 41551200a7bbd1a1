//! Sessions: snapshots, the store traits (the required `SessionStore` and
//! the capability traits a store implements or not, `capability`) and the
//! rules their implementations share, the in-memory store, custom-state
//! patches and the codec of client-held state (docs/reference.md §6).

mod approvals;
mod audit;
mod capability;
mod claim;
mod codec;
mod listing;
mod memory;
mod observe;
pub mod outbox;
pub mod patch;
mod prune;
mod query;
mod snapshot;
mod store;
mod write;

pub use crate::message::canonical_json;
pub use approvals::{ApprovalTally, HoldApproval, record_approval};
pub(crate) use audit::restart_decision;
pub use audit::{AuditDecision, AuditRecord, McpOrigin, hash_json};
pub use capability::{
    AuditStore, Capabilities, GrantStore, OutboxStore, PruneStore, SnapshotListing, WaitingCount, needed_by,
};
pub use claim::{ResumeClaim, apply_claim, apply_claim_to, claim_update, renew_claim_update, successor_id};
pub use codec::{JsonStateCodec, StateCodec};
pub use listing::filter_snapshots;
pub use memory::InMemoryStore;
pub use observe::{Observed, StoreObserver, StoreOp, observe};
pub use outbox::{
    EndpointStop, HoldTimers, OnExpire, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle,
    OutboxState, OutboxStats,
};
pub use prune::{MAX_PRUNE_BATCH, PruneOutcome, PruneRequest, prunable, prunable_snapshot};
pub use query::{AuditQuery, SnapshotQuery, Viewer};
pub use snapshot::{
    Artifact, HEARTBEAT_EXPIRY, MAX_SESSION_ID_LEN, STATE_CLAIM_PREFIX, SessionState, Snapshot, SnapshotStatus,
    SnapshotUpdate, check_session_id, lease_end, upsert_artifact,
};
pub use store::{SessionStore, SessionStoreExt};
pub use write::{insert_refused, insert_update, mint_id, prepare_row};
