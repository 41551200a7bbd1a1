//! Pruning (docs/reference.md §11.4): a step deletes every snapshot of the
//! sessions that are over and old enough — and, when asked, their audit
//! records — and keeps sessions that wait at a hold, are in doubt, run, or
//! changed since the cutoff, and one-time claims' markers.
//!
//! Cases may share a database with other cases: each walk starts after a
//! fresh prefix and examines exactly the sessions under it (ids sharing a
//! prefix sort together), never following a walk past them.

use std::sync::Arc;

use chrono::{Duration, Utc};
use holdpoint::FinishReason;
use holdpoint::session::{
    AuditQuery, PruneOutcome, PruneRequest, STATE_CLAIM_PREFIX, SessionStore, Snapshot, SnapshotStatus,
};

use super::capable::{audit, prune};
use super::{approve_record, fresh_session, get, put, snapshot};

/// A row of `session` written `days` ago with `status` (interrupted when
/// `held`).
fn aged(session: &str, days: i64, status: SnapshotStatus, held: bool) -> Snapshot {
    let mut row = snapshot(session);
    row.created_at = Utc::now() - Duration::days(days);
    row.updated_at = row.created_at;
    row.status = status;
    row.finish_reason = Some(if held {
        FinishReason::Interrupted
    } else {
        FinishReason::Stop
    });
    row
}

async fn audit_count(store: &dyn SessionStore, session: &str) -> usize {
    audit(store)
        .list_audit(&AuditQuery {
            session_id: Some(session.to_owned()),
            ..Default::default()
        })
        .await
        .expect("list_audit failed")
        .len()
}

async fn step(store: &dyn SessionStore, request: PruneRequest) -> PruneOutcome {
    prune(store)
        .prune_sessions(&request)
        .await
        .expect("prune_sessions failed")
}

/// Eight sessions under one prefix, a to h, 40 days old unless said:
/// a (a resumed hold, then its completed outcome; audited), b failed,
/// c aborted, d waiting at a hold, e in doubt (its resume's claim lapsed),
/// f old but continued yesterday, g pending, h completed (audited). With a
/// 30-day cutoff a dry run counts a, b, c and h and deletes nothing; steps
/// of three, three and two sessions then delete exactly those, the first
/// with their audit records and the last without, and each step's `next`
/// names the last session it examined. A marker of a one-time claim is
/// never pruned.
pub async fn prune_deletes_only_old_sessions_that_are_over(store: Arc<dyn SessionStore>) {
    let prefix = fresh_session();
    let s = |tag: &str| format!("{prefix}-{tag}");
    let cutoff = Utc::now() - Duration::days(30);

    let mut hold = aged(&s("a"), 40, SnapshotStatus::Completed, true);
    hold.resumed_at = Some(hold.created_at);
    let hold = put(&*store, None, hold).await;
    let mut outcome = aged(&s("a"), 40, SnapshotStatus::Completed, false);
    outcome.created_at += Duration::minutes(1);
    outcome.updated_at = outcome.created_at;
    outcome.parent_id = Some(hold.snapshot_id.clone());
    let outcome = put(&*store, None, outcome).await;
    audit(&*store)
        .append_audit(vec![
            approve_record(&s("a"), &hold.snapshot_id),
            approve_record(&s("a"), &hold.snapshot_id),
        ])
        .await
        .expect("append_audit failed");
    let failed = put(&*store, None, aged(&s("b"), 40, SnapshotStatus::Failed, false)).await;
    let aborted = put(&*store, None, aged(&s("c"), 40, SnapshotStatus::Aborted, false)).await;
    let waiting = put(&*store, None, aged(&s("d"), 40, SnapshotStatus::Completed, true)).await;
    audit(&*store)
        .append_audit(vec![approve_record(&s("d"), &waiting.snapshot_id)])
        .await
        .expect("append_audit failed");
    let mut doubt = aged(&s("e"), 40, SnapshotStatus::Completed, true);
    doubt.resumed_at = Some(doubt.created_at);
    doubt.resume_lease_until = Some(doubt.created_at + Duration::minutes(1));
    let doubt = put(&*store, None, doubt).await;
    let old_turn = put(&*store, None, aged(&s("f"), 40, SnapshotStatus::Completed, false)).await;
    let new_turn = put(&*store, None, aged(&s("f"), 1, SnapshotStatus::Completed, false)).await;
    let mut pending = aged(&s("g"), 40, SnapshotStatus::Pending, false);
    pending.finish_reason = None;
    let pending = put(&*store, None, pending).await;
    let done = put(&*store, None, aged(&s("h"), 40, SnapshotStatus::Completed, false)).await;
    audit(&*store)
        .append_audit(vec![approve_record(&s("h"), &done.snapshot_id)])
        .await
        .expect("append_audit failed");

    let mut dry = PruneRequest::new(cutoff, 8);
    dry.after = Some(prefix.clone());
    dry.audit = true;
    dry.dry_run = true;
    let counted = step(&*store, dry).await;
    assert_eq!(
        (
            counted.examined,
            counted.sessions,
            counted.snapshots,
            counted.audit_records
        ),
        (8, 4, 5, 3),
        "dry run: {counted:?}"
    );
    assert!(
        get(&*store, &outcome.snapshot_id).await.is_some(),
        "a dry run deleted a row"
    );
    assert_eq!(
        audit_count(&*store, &s("a")).await,
        2,
        "a dry run deleted audit records"
    );

    let mut first = PruneRequest::new(cutoff, 3);
    first.after = Some(prefix.clone());
    first.audit = true;
    let one = step(&*store, first).await;
    assert_eq!(
        (one.examined, one.sessions, one.snapshots, one.audit_records),
        (3, 3, 4, 2),
        "{one:?}"
    );
    assert_eq!(one.next.as_deref(), Some(s("c").as_str()));
    let mut second = PruneRequest::new(cutoff, 3);
    second.after = one.next.clone();
    second.audit = true;
    let two = step(&*store, second).await;
    assert_eq!(
        (two.examined, two.sessions, two.snapshots, two.audit_records),
        (3, 0, 0, 0),
        "{two:?}"
    );
    assert_eq!(two.next.as_deref(), Some(s("f").as_str()));
    let mut third = PruneRequest::new(cutoff, 2);
    third.after = two.next.clone();
    let three = step(&*store, third).await;
    assert_eq!(
        (three.examined, three.sessions, three.snapshots, three.audit_records),
        (2, 1, 1, 0),
        "{three:?}"
    );

    for gone in [&hold, &outcome, &failed, &aborted, &done] {
        assert!(
            get(&*store, &gone.snapshot_id).await.is_none(),
            "{} survived",
            gone.snapshot_id
        );
    }
    for tag in ["a", "b", "c", "h"] {
        let latest = store
            .get_latest_snapshot(&s(tag))
            .await
            .expect("get_latest_snapshot failed");
        assert!(latest.is_none(), "session {tag} survived");
    }
    assert_eq!(audit_count(&*store, &s("a")).await, 0, "a's audit records survived");
    assert_eq!(
        audit_count(&*store, &s("h")).await,
        1,
        "h's audit records went without `audit`"
    );
    assert_eq!(
        audit_count(&*store, &s("d")).await,
        1,
        "a kept session lost its audit records"
    );
    for kept in [&waiting, &doubt, &old_turn, &new_turn, &pending] {
        assert!(
            get(&*store, &kept.snapshot_id).await.is_some(),
            "{} was pruned",
            kept.snapshot_id
        );
    }

    let marker_session = format!("{STATE_CLAIM_PREFIX}{prefix}");
    let mut marker = aged(&marker_session, 40, SnapshotStatus::Completed, false);
    marker.finish_reason = None;
    marker.state = None;
    marker.resumed_at = Some(marker.created_at);
    let marker = put(&*store, Some(&marker_session), marker).await;
    let mut guard = PruneRequest::new(cutoff, 1);
    guard.after = Some(format!("{STATE_CLAIM_PREFIX}{}", &prefix[..prefix.len() - 1]));
    let kept = step(&*store, guard).await;
    assert_eq!((kept.examined, kept.sessions), (1, 0), "{kept:?}");
    assert!(
        get(&*store, &marker.snapshot_id).await.is_some(),
        "a claim marker was pruned"
    );

    let refused = prune(&*store).prune_sessions(&PruneRequest::new(cutoff, 0)).await;
    assert!(
        matches!(refused, Err(holdpoint::Error::InvalidArgument(_))),
        "a batch of 0: {refused:?}"
    );
}
