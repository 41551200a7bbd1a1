//! `list_snapshots` and `count_waiting`: filters, orders, the waiting-only
//! listing (docs/reference.md §7, §11.1).

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use holdpoint::FinishReason;
use holdpoint::session::{AuditRecord, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus, mint_id};

use super::capable::listing;
use super::{approve_record, fresh_id, fresh_session, put, snapshot};

/// An audit record of an approval in `session` of snapshot `snapshot_id`.
pub(super) fn record(session: &str, snapshot_id: &str, principal: Option<&str>, agent: &str) -> AuditRecord {
    AuditRecord {
        at: Utc
            .timestamp_opt(1_700_000_000, 987_654_321)
            .single()
            .expect("valid time"),
        principal: principal.map(str::to_owned),
        actor: principal.map(|p| format!("{p}/desk-7")),
        agent: Some(agent.to_owned()),
        reference: Some("ref-1".into()),
        reason: Some("looks fine".into()),
        held_by: Some("genkit-middleware/toolApproval".into()),
        ..approve_record(session, snapshot_id)
    }
}

/// A completed snapshot that ended interrupted: waiting for an answer.
pub(super) fn waiting(session: &str) -> Snapshot {
    let mut row = snapshot(session);
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

pub(super) async fn list(store: &dyn SessionStore, query: SnapshotQuery) -> Vec<String> {
    listing(store)
        .list_snapshots(&query)
        .await
        .expect("list_snapshots failed")
        .into_iter()
        .map(|s| s.snapshot_id)
        .collect()
}

/// Listing filters by agent, session and owner (combined), orders newest
/// first (ties by greatest id) and honours the limit.
pub async fn list_filters_and_orders(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let owner = fresh_id("owner");
    let session = fresh_session();
    let base = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid time");
    let mut ids = Vec::new();
    for (i, offset) in [0, 2, 1].into_iter().enumerate() {
        let mut row = snapshot(&session);
        row.created_at = base + Duration::seconds(offset);
        row.agent = Some(agent.clone());
        row.owner = (i == 2).then(|| owner.clone());
        ids.push(
            put(&*store, Some(&format!("list-{offset}-{}", mint_id())), row)
                .await
                .snapshot_id,
        );
    }
    let mut other = snapshot(&session);
    other.created_at = base + Duration::seconds(3);
    other.agent = Some(fresh_id("other-agent"));
    let other_id = put(&*store, None, other).await.snapshot_id;

    let by_agent = SnapshotQuery {
        agent: Some(agent.clone()),
        ..Default::default()
    };
    assert_eq!(
        list(&*store, by_agent.clone()).await,
        [ids[1].clone(), ids[2].clone(), ids[0].clone()]
    );
    let limited = SnapshotQuery {
        limit: Some(2),
        ..by_agent
    };
    assert_eq!(list(&*store, limited).await, [ids[1].clone(), ids[2].clone()]);
    let by_session = SnapshotQuery {
        session_id: Some(session.clone()),
        ..Default::default()
    };
    assert_eq!(
        list(&*store, by_session).await,
        [other_id, ids[1].clone(), ids[2].clone(), ids[0].clone()]
    );
    let by_owner = SnapshotQuery {
        owner: Some(owner.clone()),
        ..Default::default()
    };
    assert_eq!(list(&*store, by_owner).await, [ids[2].clone()]);
    let nobody = SnapshotQuery {
        owner: Some(owner),
        agent: Some(fresh_id("no-such-agent")),
        ..Default::default()
    };
    assert!(list(&*store, nobody).await.is_empty());

    // Listed rows read as a reader sees them: a stale pending row is expired.
    let mut stale = snapshot(&fresh_session());
    stale.agent = Some(agent.clone());
    stale.status = SnapshotStatus::Pending;
    stale.created_at = base + Duration::seconds(9);
    stale.updated_at = Utc::now() - Duration::seconds(120);
    put(&*store, None, stale).await;
    let query = SnapshotQuery {
        agent: Some(agent),
        limit: Some(1),
        ..Default::default()
    };
    let listed = listing(&*store)
        .list_snapshots(&query)
        .await
        .expect("list_snapshots failed");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, SnapshotStatus::Expired);
}

/// `waiting_only` lists a session only when its latest snapshot is
/// completed, ended interrupted and not yet claimed.
pub async fn list_waiting_only(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let mine = |mut row: Snapshot| {
        row.agent = Some(agent.clone());
        row
    };
    let base = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid time");
    let at = |row: Snapshot, offset: i64| Snapshot {
        created_at: base + Duration::seconds(offset),
        ..row
    };

    // Waiting, and the latest of its session: listed.
    let s1 = fresh_session();
    put(&*store, None, mine(at(snapshot(&s1), 0))).await;
    let listed = put(&*store, None, mine(at(waiting(&s1), 1))).await.snapshot_id;
    // Waiting, but a newer snapshot followed.
    let s2 = fresh_session();
    put(&*store, None, mine(at(waiting(&s2), 1))).await;
    put(&*store, None, mine(at(snapshot(&s2), 2))).await;
    // The latest, but already claimed.
    let s3 = fresh_session();
    let mut claimed = waiting(&s3);
    claimed.resumed_at = Some(Utc::now());
    put(&*store, None, mine(at(claimed, 1))).await;
    // The latest, ended interrupted, but still running.
    let s4 = fresh_session();
    let mut running = waiting(&s4);
    running.status = SnapshotStatus::Pending;
    running.heartbeat_at = Some(Utc::now());
    put(&*store, None, mine(at(running, 1))).await;
    // Equal createdAt: the greater id is the latest, and it is not waiting.
    let s5 = fresh_session();
    let suffix = mint_id();
    put(&*store, Some(&format!("a-{suffix}")), mine(at(waiting(&s5), 1))).await;
    put(&*store, Some(&format!("b-{suffix}")), mine(at(snapshot(&s5), 1))).await;
    // Waiting, but another agent's.
    let s6 = fresh_session();
    put(&*store, None, at(waiting(&s6), 1)).await;

    let query = SnapshotQuery {
        agent: Some(agent.clone()),
        waiting_only: true,
        ..Default::default()
    };
    assert_eq!(list(&*store, query).await, std::slice::from_ref(&listed));
    let by_session = SnapshotQuery {
        session_id: Some(s1),
        waiting_only: true,
        ..Default::default()
    };
    assert_eq!(list(&*store, by_session).await, [listed]);
}

/// `count_waiting` counts what `list_snapshots` with `waiting_only` lists
/// (per agent; over all agents it counts every agent's), and reports the oldest waiting
/// snapshot's `createdAt`.
pub async fn count_waiting_matches_the_listing(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let mine = |mut row: Snapshot| {
        row.agent = Some(agent.clone());
        row
    };
    let base = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid time");
    let at = |row: Snapshot, offset: i64| Snapshot {
        created_at: base + Duration::seconds(offset),
        ..row
    };
    let counted = |agent: String| {
        let store = Arc::clone(&store);
        async move {
            let count = listing(&*store)
                .count_waiting(Some(&agent))
                .await
                .expect("count_waiting failed");
            let query = SnapshotQuery {
                agent: Some(agent),
                waiting_only: true,
                limit: Some(usize::MAX),
                ..Default::default()
            };
            let listed = listing(&*store)
                .list_snapshots(&query)
                .await
                .expect("list_snapshots failed");
            assert_eq!(count.count, listed.len() as u64, "count_waiting and the listing differ");
            assert_eq!(
                count.oldest,
                listed.iter().map(|s| s.created_at).min(),
                "count_waiting's oldest is not the listing's"
            );
            count
        }
    };
    assert_eq!(counted(agent.clone()).await.count, 0);

    // Two waiting sessions, the older one written at offset 3.
    let s1 = fresh_session();
    put(&*store, None, mine(at(snapshot(&s1), 0))).await;
    put(&*store, None, mine(at(waiting(&s1), 5))).await;
    let s2 = fresh_session();
    put(&*store, None, mine(at(waiting(&s2), 3))).await;
    // Not counted: a newer snapshot followed; claimed; still running.
    let s3 = fresh_session();
    put(&*store, None, mine(at(waiting(&s3), 1))).await;
    put(&*store, None, mine(at(snapshot(&s3), 2))).await;
    let s4 = fresh_session();
    let mut claimed = waiting(&s4);
    claimed.resumed_at = Some(Utc::now());
    put(&*store, None, mine(at(claimed, 1))).await;
    let s5 = fresh_session();
    let mut running = waiting(&s5);
    running.status = SnapshotStatus::Pending;
    running.heartbeat_at = Some(Utc::now());
    put(&*store, None, mine(at(running, 1))).await;
    // Another agent's waiting session: counted only over all agents.
    let s6 = fresh_session();
    put(&*store, None, at(waiting(&s6), 0)).await;

    let mine_counted = counted(agent.clone()).await;
    assert_eq!(mine_counted.count, 2);
    assert_eq!(mine_counted.oldest, Some(base + Duration::seconds(3)));
    // Over all agents (other cases may write beside this one, so no
    // comparison with a listing taken at another moment).
    let all = listing(&*store)
        .count_waiting(None)
        .await
        .expect("count_waiting failed");
    assert!(all.count >= 3, "{all:?}");
    assert!(all.oldest.is_some_and(|o| o <= base), "{all:?}");
}
