//! The [`SessionStore`] contract as a test suite (docs/reference.md §6).
//! This file is the suite's index (the case table and the runners; the
//! cases live in the sibling modules), which is why it passes 400 lines.
//!
//! Each case is a public async function taking a fresh store handle; each
//! uses its own fresh session and snapshot ids, so cases may share one
//! database and need not start from an empty store. [`CASES`] lists them
//! all by name, and [`run_store_suite`] runs that list. Cases that need two
//! handles on one database are in [`run_two_handle_suite`].
//!
//! A failing case panics with its name in the message.

mod abort;
mod approvals;
mod basic;
pub mod capable;
mod claim;
mod concurrency;
mod decisions;
mod grants;
mod listing;
mod outbox;
mod outbox_ops;
mod outbox_writes;
mod prune;
mod quorum;
mod recency;
mod viewer;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::FutureExt;
use futures::future::BoxFuture;
use holdpoint::session::{
    AuditDecision, AuditQuery, AuditRecord, SessionState, SessionStore, Snapshot, SnapshotQuery, SnapshotUpdate,
    mint_id,
};
use holdpoint::{Error, Result};

pub use abort::{abort_missing_is_none, abort_pending_requests_abort, abort_terminal_is_unchanged};
pub use approvals::approval_decisions_are_audited_and_pending_is_listed;
pub use basic::{
    caller_timestamps_are_kept, default_status_is_completed, fixed_id_is_kept, get_missing_is_none,
    id_is_minted_when_absent, missing_session_id_is_rejected, reads_are_copies, session_id_never_changes,
    skip_write_writes_nothing, unusual_content_round_trips, update_error_writes_nothing,
};
pub use claim::{
    audit_appends_and_lists, claim_changes_only_the_claim_fields, claim_resume_once_with_audit,
    in_doubt_looks_past_a_died_detached_row, lapsed_claims_are_in_doubt_and_taken_over_once,
};
pub use concurrency::{
    RACERS, batch_inserts_write_all_or_none, concurrent_claim_resumes_have_one_winner,
    concurrent_claims_have_one_winner, concurrent_creators_of_one_id_serialise, concurrent_increments_all_land,
    inserts_write_an_id_once, two_handles_claim_once, two_handles_claim_resume_once, two_handles_increment,
    two_handles_insert_once, two_handles_see_each_other,
};
pub use decisions::refused_answers_leave_every_row_as_it_was;
pub use grants::{
    audited_saves_write_both_or_neither, expired_grants_are_never_used, grant_uses_are_spent_once,
    grants_are_kept_listed_and_revoked, two_handles_spend_a_last_use_once,
};
pub use listing::{count_waiting_matches_the_listing, list_filters_and_orders, list_waiting_only};
pub use outbox::{
    outbox_events_are_written_with_the_hold, outbox_settles_need_the_claim, outbox_timers_fire_once,
    two_handles_claim_outbox_once,
};
pub use outbox_ops::outbox_batches_pages_and_stopped_endpoints;
pub use outbox_writes::a_store_without_a_channel_writes_only_the_timers_that_act;
pub use prune::prune_deletes_only_old_sessions_that_are_over;
pub use quorum::{partial_approvals_are_durable_and_written_only_while_waiting, two_handles_complete_a_quorum_once};
pub use recency::{
    heartbeat_does_not_move_recency, latest_by_created_at, latest_ties_by_snapshot_id, stale_pending_reads_expired,
};
pub use viewer::{
    an_approvers_page_lists_what_the_viewer_may_see, rows_without_approvers_are_listed_and_filled_in_on_opening,
};
pub use watch::{
    watch_ends_for_missing_id, watch_reports_changes, watch_starts_with_current_value, watch_stops_when_dropped,
};

/// One case of the suite: takes a store, panics on failure.
pub type StoreCase = fn(Arc<dyn SessionStore>) -> BoxFuture<'static, ()>;

/// Every single-handle case, by name, in the order [`run_store_suite`] runs them.
pub const CASES: &[(&str, StoreCase)] = &[
    ("get_missing_is_none", |s| get_missing_is_none(s).boxed()),
    ("fixed_id_is_kept", |s| fixed_id_is_kept(s).boxed()),
    ("id_is_minted_when_absent", |s| id_is_minted_when_absent(s).boxed()),
    ("reads_are_copies", |s| reads_are_copies(s).boxed()),
    ("default_status_is_completed", |s| {
        default_status_is_completed(s).boxed()
    }),
    ("skip_write_writes_nothing", |s| skip_write_writes_nothing(s).boxed()),
    ("update_error_writes_nothing", |s| {
        update_error_writes_nothing(s).boxed()
    }),
    ("caller_timestamps_are_kept", |s| caller_timestamps_are_kept(s).boxed()),
    ("missing_session_id_is_rejected", |s| {
        missing_session_id_is_rejected(s).boxed()
    }),
    ("session_id_never_changes", |s| session_id_never_changes(s).boxed()),
    ("unusual_content_round_trips", |s| {
        unusual_content_round_trips(s).boxed()
    }),
    ("latest_by_created_at", |s| latest_by_created_at(s).boxed()),
    ("latest_ties_by_snapshot_id", |s| latest_ties_by_snapshot_id(s).boxed()),
    ("heartbeat_does_not_move_recency", |s| {
        heartbeat_does_not_move_recency(s).boxed()
    }),
    ("stale_pending_reads_expired", |s| {
        stale_pending_reads_expired(s).boxed()
    }),
    ("abort_pending_requests_abort", |s| {
        abort_pending_requests_abort(s).boxed()
    }),
    ("abort_terminal_is_unchanged", |s| {
        abort_terminal_is_unchanged(s).boxed()
    }),
    ("abort_missing_is_none", |s| abort_missing_is_none(s).boxed()),
    ("watch_starts_with_current_value", |s| {
        watch_starts_with_current_value(s).boxed()
    }),
    ("watch_reports_changes", |s| watch_reports_changes(s).boxed()),
    ("watch_ends_for_missing_id", |s| watch_ends_for_missing_id(s).boxed()),
    ("watch_stops_when_dropped", |s| watch_stops_when_dropped(s).boxed()),
    ("concurrent_increments_all_land", |s| {
        concurrent_increments_all_land(s).boxed()
    }),
    ("concurrent_claims_have_one_winner", |s| {
        concurrent_claims_have_one_winner(s).boxed()
    }),
    ("concurrent_creators_of_one_id_serialise", |s| {
        concurrent_creators_of_one_id_serialise(s).boxed()
    }),
    ("concurrent_claim_resumes_have_one_winner", |s| {
        concurrent_claim_resumes_have_one_winner(s).boxed()
    }),
    ("inserts_write_an_id_once", |s| inserts_write_an_id_once(s).boxed()),
    ("batch_inserts_write_all_or_none", |s| {
        batch_inserts_write_all_or_none(s).boxed()
    }),
    ("list_filters_and_orders", |s| list_filters_and_orders(s).boxed()),
    ("list_waiting_only", |s| list_waiting_only(s).boxed()),
    ("count_waiting_matches_the_listing", |s| {
        count_waiting_matches_the_listing(s).boxed()
    }),
    ("audit_appends_and_lists", |s| audit_appends_and_lists(s).boxed()),
    ("claim_resume_once_with_audit", |s| {
        claim_resume_once_with_audit(s).boxed()
    }),
    ("claim_changes_only_the_claim_fields", |s| {
        claim_changes_only_the_claim_fields(s).boxed()
    }),
    ("lapsed_claims_are_in_doubt_and_taken_over_once", |s| {
        lapsed_claims_are_in_doubt_and_taken_over_once(s).boxed()
    }),
    ("in_doubt_looks_past_a_died_detached_row", |s| {
        in_doubt_looks_past_a_died_detached_row(s).boxed()
    }),
    ("approval_decisions_are_audited_and_pending_is_listed", |s| {
        approval_decisions_are_audited_and_pending_is_listed(s).boxed()
    }),
    ("partial_approvals_are_durable_and_written_only_while_waiting", |s| {
        partial_approvals_are_durable_and_written_only_while_waiting(s).boxed()
    }),
    ("outbox_events_are_written_with_the_hold", |s| {
        outbox_events_are_written_with_the_hold(s).boxed()
    }),
    ("outbox_settles_need_the_claim", |s| {
        outbox_settles_need_the_claim(s).boxed()
    }),
    ("outbox_timers_fire_once", |s| outbox_timers_fire_once(s).boxed()),
    ("grants_are_kept_listed_and_revoked", |s| {
        grants_are_kept_listed_and_revoked(s).boxed()
    }),
    ("expired_grants_are_never_used", |s| {
        expired_grants_are_never_used(s).boxed()
    }),
    ("grant_uses_are_spent_once", |s| grant_uses_are_spent_once(s).boxed()),
    ("audited_saves_write_both_or_neither", |s| {
        audited_saves_write_both_or_neither(s).boxed()
    }),
    ("outbox_batches_pages_and_stopped_endpoints", |s| {
        outbox_batches_pages_and_stopped_endpoints(s).boxed()
    }),
    ("prune_deletes_only_old_sessions_that_are_over", |s| {
        prune_deletes_only_old_sessions_that_are_over(s).boxed()
    }),
    ("an_approvers_page_lists_what_the_viewer_may_see", |s| {
        an_approvers_page_lists_what_the_viewer_may_see(s).boxed()
    }),
    ("refused_answers_leave_every_row_as_it_was", |s| {
        refused_answers_leave_every_row_as_it_was(s).boxed()
    }),
];

/// How long one case may take before it counts as hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs every case in [`CASES`], each on a store from `factory`, one after
/// another. Panics naming the first case that fails.
pub async fn run_store_suite<F, Fut>(factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn SessionStore>>,
{
    for (name, case) in CASES {
        let store = factory().await;
        run_case(name, case(store)).await;
    }
}

/// Runs the cases that need two handles on one database (`a` and `b` must
/// reach the same rows through separate connections or pools): each sees
/// the other's writes and status changes, concurrent increments and claims
/// (`save_snapshot` with the `resumedAt` pattern, and `claim_resume` with
/// its audit records) and inserts of one id split over both land exactly
/// as on one handle.
pub async fn run_two_handle_suite(a: Arc<dyn SessionStore>, b: Arc<dyn SessionStore>) {
    run_case(
        "two_handles_see_each_other",
        two_handles_see_each_other(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_increment",
        two_handles_increment(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_claim_once",
        two_handles_claim_once(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_claim_resume_once",
        two_handles_claim_resume_once(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_insert_once",
        two_handles_insert_once(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_claim_outbox_once",
        two_handles_claim_outbox_once(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_spend_a_last_use_once",
        two_handles_spend_a_last_use_once(a.clone(), b.clone()).boxed(),
    )
    .await;
    run_case(
        "two_handles_complete_a_quorum_once",
        two_handles_complete_a_quorum_once(a, b).boxed(),
    )
    .await;
}

async fn run_case(name: &str, case: BoxFuture<'static, ()>) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(CASE_TIMEOUT, tokio::spawn(case)).await;
    match outcome {
        Err(_) => panic!("store suite case `{name}` did not finish within {CASE_TIMEOUT:?}"),
        Ok(Err(join)) => match join.try_into_panic() {
            Ok(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                panic!("store suite case `{name}` failed: {message}");
            }
            Err(join) => panic!("store suite case `{name}` was cancelled: {join}"),
        },
        Ok(Ok(())) => eprintln!("store suite: {name} ok ({:?})", started.elapsed()),
    }
}

/// The exactly-once claim as the agent makes it (docs/reference.md §7): sets
/// `resumedAt` on an existing row, or fails with `ABORTED` "already
/// resumed" when it is set; a missing row is `NOT_FOUND`.
pub fn claim_update() -> SnapshotUpdate {
    Box::new(|existing| {
        let Some(row) = existing else {
            return Err(Error::NotFound("snapshot not found".into()));
        };
        if row.resumed_at.is_some() {
            return Err(Error::Aborted(format!(
                "snapshot {} was already resumed",
                row.snapshot_id
            )));
        }
        let mut next = row.clone();
        next.resumed_at = Some(Utc::now());
        Ok(Some(next))
    })
}

/// An `approve` decision on a `transfer` call of snapshot `snapshot_id` in
/// `session_id`, made now, with a fresh id and no principal, reference or
/// reason: the audit record store tests start from (override fields with
/// `AuditRecord { principal: …, ..approve_record(…) }`).
pub fn approve_record(session_id: &str, snapshot_id: &str) -> AuditRecord {
    AuditRecord {
        id: mint_id(),
        at: Utc::now(),
        principal: None,
        actor: None,
        agent: Some("agent".into()),
        session_id: session_id.to_owned(),
        snapshot_id: snapshot_id.to_owned(),
        tool: "transfer".into(),
        reference: None,
        input_hash: "0".repeat(64),
        input: None,
        original_input: None,
        original_input_hash: None,
        decision: AuditDecision::Approve,
        reason: None,
        held_by: None,
        settles: false,
        mcp: None,
        grant: None,
    }
}

// --- helpers shared by the cases ---

/// A session id no other case uses.
fn fresh_session() -> String {
    format!("suite-{}", mint_id())
}

/// A snapshot id no other case uses.
fn fresh_id(tag: &str) -> String {
    format!("{tag}-{}", mint_id())
}

fn snapshot(session: &str) -> Snapshot {
    Snapshot::new(SessionState::new(session))
}

/// Saves `row` under `id` (or a minted id), whatever is there.
async fn put(store: &dyn SessionStore, id: Option<&str>, row: Snapshot) -> Snapshot {
    store
        .save_snapshot(id, Box::new(move |_| Ok(Some(row))))
        .await
        .expect("save_snapshot failed")
        .expect("save_snapshot wrote nothing")
}

async fn get(store: &dyn SessionStore, id: &str) -> Option<Snapshot> {
    store.get_snapshot(id).await.expect("get_snapshot failed")
}

async fn get_present(store: &dyn SessionStore, id: &str) -> Snapshot {
    get(store, id)
        .await
        .unwrap_or_else(|| panic!("snapshot {id} should exist"))
}

/// Saves with `update`, returning the result unchanged.
async fn save(store: &dyn SessionStore, id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
    store.save_snapshot(id, update).await
}

/// The filtered `list_snapshots` queries a SQL store must answer from an
/// index, each with the index it should read (both SQL stores name their
/// indexes alike): by session, agent, owner, the waiting rows, and the
/// waiting rows an approver may see. The
/// values match the rows the stores' query-plan tests insert (`session-7`,
/// `agent-7`, `owner-8`).
pub fn indexed_snapshot_listings() -> Vec<(SnapshotQuery, &'static str)> {
    vec![
        (
            SnapshotQuery {
                session_id: Some("session-7".into()),
                ..Default::default()
            },
            "holdpoint_snapshots_latest",
        ),
        (
            SnapshotQuery {
                agent: Some("agent-7".into()),
                ..Default::default()
            },
            "holdpoint_snapshots_agent",
        ),
        (
            SnapshotQuery {
                owner: Some("owner-8".into()),
                ..Default::default()
            },
            "holdpoint_snapshots_owner",
        ),
        (
            SnapshotQuery {
                waiting_only: true,
                ..Default::default()
            },
            "holdpoint_snapshots_waiting",
        ),
        (
            SnapshotQuery {
                agent: Some("agent-7".into()),
                waiting_only: true,
                ..Default::default()
            },
            "holdpoint_snapshots_waiting_agent",
        ),
        (
            SnapshotQuery {
                agent: Some("agent-7".into()),
                waiting_only: true,
                viewer: Some(holdpoint::session::Viewer {
                    principal: Some("owner-8".into()),
                    roles: vec!["legal".into(), "finance".into()],
                }),
                ..Default::default()
            },
            "holdpoint_snapshots_waiting_agent",
        ),
    ]
}

/// The filtered `list_audit` queries a SQL store must answer from an index,
/// each with the index it should read: by session, principal and agent.
pub fn indexed_audit_listings() -> Vec<(AuditQuery, &'static str)> {
    vec![
        (
            AuditQuery {
                session_id: Some("session-7".into()),
                ..Default::default()
            },
            "holdpoint_audit_session",
        ),
        (
            AuditQuery {
                principal: Some("owner-8".into()),
                ..Default::default()
            },
            "holdpoint_audit_principal",
        ),
        (
            AuditQuery {
                agent: Some("agent-7".into()),
                ..Default::default()
            },
            "holdpoint_audit_agent",
        ),
    ]
}
