//! The reference model: what it keeps of each row, and the comparison of
//! a store's read with it.

use std::collections::BTreeMap;

use super::SESSIONS;
use chrono::{DateTime, Duration, SubsecRound, TimeZone, Utc};
use holdpoint::session::{SessionState, SessionStore, Snapshot, SnapshotStatus, mint_id};
use holdpoint::{ErrorBody, FinishReason};

/// What the model keeps of a row, and what is compared: everything a
/// store must keep exactly (timestamps the model sets are whole seconds,
/// so stores that keep micro- or milliseconds compare equal).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub(super) id: String,
    pub(super) session_id: String,
    pub(super) created_at: DateTime<Utc>,
    pub(super) heartbeat_at: Option<DateTime<Utc>>,
    pub(super) status: SnapshotStatus,
    pub(super) finish_reason: Option<FinishReason>,
    pub(super) error: Option<ErrorBody>,
    pub(super) resumed: bool,
    pub(super) marker: i64,
}

impl Row {
    pub(super) fn read_status(&self, now: DateTime<Utc>) -> SnapshotStatus {
        if self.status == SnapshotStatus::Pending
            && self
                .heartbeat_at
                .is_some_and(|h| now.signed_duration_since(h) > Duration::seconds(60))
        {
            return SnapshotStatus::Expired;
        }
        self.status
    }

    pub(super) fn of(s: &Snapshot) -> Row {
        Row {
            id: s.snapshot_id.clone(),
            session_id: s.session_id.clone(),
            created_at: s.created_at,
            heartbeat_at: s.heartbeat_at,
            status: s.status,
            finish_reason: s.finish_reason,
            error: s.error.clone(),
            resumed: s.resumed_at.is_some(),
            marker: marker_of(s),
        }
    }
}

/// Each write stores a counter in the custom state, so a read shows which
/// write it sees.
pub(super) fn marker_of(s: &Snapshot) -> i64 {
    s.state
        .as_ref()
        .and_then(|st| st.custom.get("marker"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(-1)
}

pub(super) fn set_marker(s: &mut Snapshot, marker: i64) {
    let state = s.state.get_or_insert_with(|| SessionState::new(s.session_id.clone()));
    state.custom = serde_json::json!({ "marker": marker });
}

pub(super) struct Model {
    pub(super) prefix: String,
    pub(super) rows: BTreeMap<String, Row>,
    pub(super) order: Vec<String>,
    pub(super) writes: i64,
    pub(super) base: DateTime<Utc>,
}

pub(super) fn now_secs() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

impl Model {
    pub(super) fn new() -> Self {
        Model {
            prefix: mint_id(),
            rows: BTreeMap::new(),
            order: Vec::new(),
            writes: 0,
            base: Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).single().unwrap_or_default(),
        }
    }

    pub(super) fn session(&self, n: u8) -> String {
        format!("{}-s{}", self.prefix, n % SESSIONS)
    }

    pub(super) fn row_id(&self, n: u8) -> Option<String> {
        if self.order.is_empty() {
            return None;
        }
        Some(self.order[usize::from(n) % self.order.len()].clone())
    }

    pub(super) fn next_marker(&mut self) -> i64 {
        self.writes += 1;
        self.writes
    }

    pub(super) fn latest(&self, session: &str) -> Option<&Row> {
        self.rows
            .values()
            .filter(|r| r.session_id == session)
            .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
    }

    pub(super) async fn compare_read(&self, store: &dyn SessionStore, id: &str) -> Result<(), String> {
        let got = store.get_snapshot(id).await.map_err(|e| format!("get {id}: {e}"))?;
        let now = Utc::now();
        match (got, self.rows.get(id)) {
            (None, None) => Ok(()),
            (Some(s), Some(row)) => {
                let mut expected = row.clone();
                expected.status = row.read_status(now);
                check_eq!(Row::of(&s), expected, "get_snapshot({id})");
                Ok(())
            }
            (got, want) => Err(format!("get_snapshot({id}): store gave {got:?}, model has {want:?}")),
        }
    }
}
