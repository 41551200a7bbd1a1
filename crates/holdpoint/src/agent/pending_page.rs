//! One page of an approver's pending holds (docs/reference.md §10.7): the
//! holds of anyone's sessions are filtered by the caller's roles *before*
//! the page is cut, so newer holds the caller may not answer never leave
//! a page short while older ones it may answer exist.

use std::collections::HashSet;

use super::{Access, Agent, PendingApproval, audit};
use crate::error::Result;
use crate::session::{SnapshotQuery, Viewer};

/// The most waiting snapshots one listing reads before it answers with
/// what it found.
const MAX_SCAN: usize = 100_000;

/// The paused calls of up to `query.limit()` waiting snapshots that
/// `access` may see, newest first: reads a growing window of waiting
/// snapshots until the page is full, the store has no more, or
/// [`MAX_SCAN`] rows were read.
pub(super) async fn approvers_page(
    agent: &Agent,
    query: SnapshotQuery,
    access: Access<'_>,
) -> Result<Vec<PendingApproval>> {
    let store = agent.require_listing()?;
    let want = query.limit();
    // The store narrows the rows to those the caller may see (an indexed
    // query in the SQL stores); the calls are still filtered here, one by
    // one, as a row is listed when any one of its calls is visible.
    let viewer = match access {
        Access::Caller { principal, roles } => Some(Viewer {
            principal: principal.map(str::to_owned),
            roles: roles.to_vec(),
        }),
        Access::As(principal) => Some(Viewer {
            principal: principal.map(str::to_owned),
            roles: Vec::new(),
        }),
        Access::Full => None,
    };
    let mut window = want.max(1);
    loop {
        let read = SnapshotQuery {
            agent: Some(agent.name().to_owned()),
            waiting_only: true,
            limit: Some(window),
            viewer: viewer.clone(),
            ..query.clone()
        };
        let snapshots = store.list_snapshots(&read).await?;
        let exhausted = snapshots.len() < window || window >= MAX_SCAN;
        let mut kept: HashSet<String> = HashSet::new();
        let mut calls = Vec::new();
        for snapshot in snapshots.iter().filter(|s| s.belongs_to(agent.name())) {
            let visible: Vec<PendingApproval> = audit::pending_of(snapshot)
                .into_iter()
                .filter(|c| access.sees_call(c))
                .collect();
            if visible.is_empty() {
                continue;
            }
            if kept.len() == want {
                break;
            }
            kept.insert(snapshot.snapshot_id.clone());
            calls.extend(visible);
        }
        if kept.len() >= want || exhausted {
            return Ok(calls);
        }
        window = window.saturating_mul(4).min(MAX_SCAN);
    }
}
