//! The audit trail and `claim_resume`: appends and listings of decisions,
//! one claim per hold, and lapsed claims found in doubt and taken over
//! once (docs/reference.md §7, §11.1, §11.2).

use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use holdpoint::Status;
use holdpoint::session::{
    AuditDecision, AuditQuery, AuditRecord, ResumeClaim, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus,
    hash_json,
};
use serde_json::json;

use super::capable::audit;
use super::listing::{list, record, waiting};
use super::{fresh_id, fresh_session, get_present, put, snapshot};

/// Audit records come back exactly (a restart's replaced input too),
/// newest first, filtered by agent, session and principal, up to the
/// limit; an empty append is fine.
pub async fn audit_appends_and_lists(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let agent = fresh_id("agent");
    let first = record(&session, "snap-1", Some("alice"), &agent);
    let (held, ran) = (
        json!({"amount": 500, "toAccount": "savings"}),
        json!({"amount": 999999.5, "toAccount": "mallory"}),
    );
    let second = AuditRecord {
        decision: AuditDecision::Restart,
        input_hash: hash_json(&ran),
        input: Some(ran),
        original_input_hash: Some(hash_json(&held)),
        original_input: Some(held),
        ..record(&session, "snap-1", Some("bob"), &agent)
    };
    let third = record(&session, "snap-2", Some("alice"), &agent);
    audit(&*store)
        .append_audit(vec![first.clone(), second.clone()])
        .await
        .expect("append failed");
    audit(&*store)
        .append_audit(vec![third.clone()])
        .await
        .expect("append failed");
    audit(&*store)
        .append_audit(Vec::new())
        .await
        .expect("an empty append failed");

    let query = |principal: Option<&str>, limit: Option<usize>| AuditQuery {
        agent: Some(agent.clone()),
        session_id: Some(session.clone()),
        principal: principal.map(str::to_owned),
        limit,
    };
    let all = audit(&*store)
        .list_audit(&query(None, None))
        .await
        .expect("list failed");
    assert_eq!(all, [third.clone(), second.clone(), first.clone()]);
    let alice = audit(&*store)
        .list_audit(&query(Some("alice"), None))
        .await
        .expect("list failed");
    assert_eq!(alice, [third.clone(), first]);
    let newest = audit(&*store)
        .list_audit(&query(None, Some(1)))
        .await
        .expect("list failed");
    assert_eq!(newest, [third]);
    let by_session = AuditQuery {
        session_id: Some(session),
        principal: Some("bob".into()),
        ..Default::default()
    };
    assert_eq!(
        audit(&*store).list_audit(&by_session).await.expect("list failed"),
        [second]
    );
}

/// `claim_resume` sets `resumedAt` and appends the audit records once; a
/// second claim is `ABORTED` "already resumed" and appends nothing; an
/// unknown snapshot is `NOT_FOUND`.
pub async fn claim_resume_once_with_audit(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let agent = fresh_id("agent");
    let id = put(&*store, None, waiting(&session)).await.snapshot_id;
    let winner = record(&session, &id, Some("alice"), &agent);
    store
        .claim_resume(ResumeClaim::new(id.clone()), vec![winner.clone()])
        .await
        .expect("the first claim failed");
    let claimed = get_present(&*store, &id).await;
    assert!(claimed.resumed_at.is_some(), "the claim did not set resumedAt");
    assert!(!claimed.is_waiting());

    let loser = record(&session, &id, Some("bob"), &agent);
    let err = store
        .claim_resume(ResumeClaim::new(id.clone()), vec![loser])
        .await
        .expect_err("a second claim must fail");
    assert_eq!(err.status(), Status::Aborted, "{err}");
    assert!(err.to_string().contains("already resumed"), "{err}");

    let missing = fresh_id("missing");
    let err = store
        .claim_resume(
            ResumeClaim::new(missing.clone()),
            vec![record(&session, &missing, None, &agent)],
        )
        .await
        .expect_err("claiming a missing snapshot must fail");
    assert_eq!(err.status(), Status::NotFound, "{err}");
    assert!(store.get_snapshot(&missing).await.expect("get failed").is_none());

    let trail = audit(&*store)
        .list_audit(&AuditQuery {
            session_id: Some(session),
            ..Default::default()
        })
        .await
        .expect("list failed");
    assert_eq!(trail, [winner], "only the winning claim may leave audit records");
}

/// A claim changes a row's `resumedAt` and lease and nothing else, also
/// when the row's content names those fields (in its state, in non-ASCII
/// text) and when it was saved with a lease but no `resumedAt`.
pub async fn claim_changes_only_the_claim_fields(store: Arc<dyn SessionStore>) {
    let session = fresh_session();
    let plain = waiting(&session);
    let mut named = waiting(&session);
    if let Some(state) = named.state.as_mut() {
        state.custom = serde_json::json!({
            "resumedAt": "not a claim",
            "note": "\"resumeLeaseUntil\": Überweisung 💸 \\ }",
        });
    }
    let mut leased = waiting(&session);
    leased.resume_lease_until = Some(Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid time"));
    for row in [plain, named, leased] {
        let saved = put(&*store, None, row).await;
        let claim = ResumeClaim::new(saved.snapshot_id.clone());
        let before = Utc::now();
        store
            .claim_resume(claim.clone(), Vec::new())
            .await
            .expect("the claim failed");
        let claimed = get_present(&*store, &saved.snapshot_id).await;
        let at = claimed.resumed_at.expect("the claim did not set resumedAt");
        assert!(
            at >= before - Duration::seconds(1),
            "resumedAt {at} is not the claim's time"
        );
        let mut expected = saved.clone();
        expected.resumed_at = Some(at);
        expected.resume_lease_until = Some(claim.lease_until);
        assert_eq!(claimed, expected, "the claim changed more than its fields");
        let err = store
            .claim_resume(claim, Vec::new())
            .await
            .expect_err("a second claim must fail");
        assert_eq!(err.status(), Status::Aborted, "{err}");
        assert_eq!(get_present(&*store, &saved.snapshot_id).await, expected);
    }
}

/// A waiting row of `agent` in `session`.
fn waiting_of(session: &str, agent: &str) -> Snapshot {
    let mut row = waiting(session);
    row.agent = Some(agent.to_owned());
    row
}

/// A first claim of row `id` whose lease lapsed a second ago.
fn lapsed_claim(id: &str) -> ResumeClaim {
    ResumeClaim {
        snapshot_id: id.to_owned(),
        lease_until: Utc::now() - Duration::seconds(1),
        takeover: false,
    }
}

/// A claimed row whose lease lapsed, with nothing after it in its session,
/// lists as in doubt (docs/reference.md §8); a claim still held, a settled resume
/// (a newer row follows) and a waiting row do not. A first claim of the
/// lapsed row is `ABORTED`. A takeover succeeds once, only on a lapsed
/// claim, keeps `resumedAt` and renews the lease; a refused claim or
/// takeover changes nothing and leaves no audit record.
pub async fn lapsed_claims_are_in_doubt_and_taken_over_once(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let row_of = |session: &str| waiting_of(session, &agent);
    let (s_doubt, s_live, s_done, s_wait) = (fresh_session(), fresh_session(), fresh_session(), fresh_session());
    let doubt = put(&*store, None, row_of(&s_doubt)).await.snapshot_id;
    let live = put(&*store, None, row_of(&s_live)).await.snapshot_id;
    let done = put(&*store, None, row_of(&s_done)).await.snapshot_id;
    let wait = put(&*store, None, row_of(&s_wait)).await.snapshot_id;
    let first = record(&s_doubt, &doubt, Some("alice"), &agent);
    store
        .claim_resume(lapsed_claim(&doubt), vec![first.clone()])
        .await
        .expect("claim failed");
    store
        .claim_resume(ResumeClaim::new(live.clone()), Vec::new())
        .await
        .expect("claim failed");
    store
        .claim_resume(lapsed_claim(&done), Vec::new())
        .await
        .expect("claim failed");
    let mut after = snapshot(&s_done);
    after.parent_id = Some(done.clone());
    after.created_at = Utc::now() + Duration::seconds(1);
    after.agent = Some(agent.clone());
    put(&*store, None, after).await;

    let in_doubt = SnapshotQuery {
        agent: Some(agent.clone()),
        in_doubt_only: true,
        ..Default::default()
    };
    assert_eq!(list(&*store, in_doubt.clone()).await, std::slice::from_ref(&doubt));
    let waiting_now = SnapshotQuery {
        agent: Some(agent.clone()),
        waiting_only: true,
        ..Default::default()
    };
    assert_eq!(list(&*store, waiting_now).await, std::slice::from_ref(&wait));

    // Refused takeovers: a claim still held, an unclaimed row, a missing row.
    for (id, status) in [
        (&live, Status::FailedPrecondition),
        (&wait, Status::FailedPrecondition),
        (&fresh_id("missing"), Status::NotFound),
    ] {
        let before = store.get_snapshot(id).await.expect("get failed");
        let err = store
            .claim_resume(
                ResumeClaim::new(id.clone()).takeover(),
                vec![record(&s_live, id, None, &agent)],
            )
            .await
            .expect_err("this takeover must be refused");
        assert_eq!(err.status(), status, "{id}: {err}");
        assert_eq!(
            store.get_snapshot(id).await.expect("get failed"),
            before,
            "{id} changed"
        );
    }

    // A first claim of a row claimed before is refused however its lease
    // stands: the claim rule asks whether `resumedAt` is set, not whether
    // the lease lapsed (only a takeover may take a lapsed claim).
    let before = get_present(&*store, &doubt).await;
    let err = store
        .claim_resume(
            ResumeClaim::new(doubt.clone()),
            vec![record(&s_doubt, &doubt, Some("bob"), &agent)],
        )
        .await
        .expect_err("a first claim of a lapsed claim must be refused");
    assert_eq!(err.status(), Status::Aborted, "{err}");
    assert!(err.to_string().contains("already resumed"), "{err}");
    assert_eq!(
        get_present(&*store, &doubt).await,
        before,
        "a refused claim changed the row"
    );

    // The takeover of the lapsed claim, once.
    let mut settle = record(&s_doubt, &doubt, Some("ops"), &agent);
    settle.settles = true;
    store
        .claim_resume(ResumeClaim::new(doubt.clone()).takeover(), vec![settle.clone()])
        .await
        .expect("the takeover failed");
    let taken = get_present(&*store, &doubt).await;
    assert_eq!(taken.resumed_at, before.resumed_at, "the first claim's time is kept");
    assert!(
        taken.resume_lease_until > before.resume_lease_until,
        "the lease is renewed"
    );
    assert!(
        list(&*store, in_doubt).await.is_empty(),
        "a taken-over claim is not in doubt"
    );
    let err = store
        .claim_resume(ResumeClaim::new(doubt.clone()).takeover(), Vec::new())
        .await
        .expect_err("a second takeover must be refused");
    assert_eq!(err.status(), Status::FailedPrecondition, "{err}");

    let trail = audit(&*store)
        .list_audit(&AuditQuery {
            agent: Some(agent),
            ..Default::default()
        })
        .await
        .expect("list failed");
    assert_eq!(trail, [settle, first], "refused takeovers leave no audit records");
}

/// A resume that detached and died leaves an unfinished pending row after
/// the snapshot whose claim lapsed: the in-doubt listing looks past it
/// (pending or aborting, continuing that snapshot), and only past it: a
/// finished successor, or a pending row continuing another snapshot, still
/// counts as newer. `waiting_only` is unchanged: the latest row only.
pub async fn in_doubt_looks_past_a_died_detached_row(store: Arc<dyn SessionStore>) {
    let agent = fresh_id("agent");
    let row_of = |session: &str| waiting_of(session, &agent);
    let newer = |session: &str, parent: &str, status: SnapshotStatus, secs: i64| {
        let mut row = snapshot(session);
        row.parent_id = Some(parent.to_owned());
        row.status = status;
        row.heartbeat_at = Some(Utc::now());
        row.created_at = Utc::now() + Duration::seconds(secs);
        row.agent = Some(agent.clone());
        row
    };
    let (s_pending, s_aborting, s_other) = (fresh_session(), fresh_session(), fresh_session());
    let mut paused = Vec::new();
    for session in [&s_pending, &s_aborting, &s_other] {
        let id = put(&*store, None, row_of(session)).await.snapshot_id;
        store
            .claim_resume(lapsed_claim(&id), Vec::new())
            .await
            .expect("claim failed");
        paused.push(id);
    }
    let pending = put(&*store, None, newer(&s_pending, &paused[0], SnapshotStatus::Pending, 1))
        .await
        .snapshot_id;
    put(
        &*store,
        None,
        newer(&s_aborting, &paused[1], SnapshotStatus::Aborting, 1),
    )
    .await;
    // A pending row continuing another row of the session hides the claim.
    let between = put(&*store, None, newer(&s_other, &paused[2], SnapshotStatus::Completed, 1))
        .await
        .snapshot_id;
    put(&*store, None, newer(&s_other, &between, SnapshotStatus::Pending, 2)).await;

    let in_doubt = SnapshotQuery {
        agent: Some(agent.clone()),
        in_doubt_only: true,
        ..Default::default()
    };
    let mut listed = list(&*store, in_doubt.clone()).await;
    listed.sort();
    let mut expected = vec![paused[0].clone(), paused[1].clone()];
    expected.sort();
    assert_eq!(listed, expected);
    let waiting_now = SnapshotQuery {
        agent: Some(agent.clone()),
        waiting_only: true,
        ..Default::default()
    };
    assert!(list(&*store, waiting_now).await.is_empty());

    // Once the pending row is finished it counts as newer again.
    store
        .save_snapshot(
            Some(&pending),
            Box::new(|row| {
                let mut row = row.cloned().expect("the pending row");
                row.status = SnapshotStatus::Completed;
                Ok(Some(row))
            }),
        )
        .await
        .expect("save failed");
    assert_eq!(list(&*store, in_doubt).await, std::slice::from_ref(&paused[1]));
}
