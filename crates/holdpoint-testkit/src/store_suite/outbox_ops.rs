//! The outbox's operator side (docs/reference.md §11.3): settles in
//! batches, paged listings, counts, and endpoints stopped for good that a
//! retry or an explicit command re-enables.
//!
//! Stops are kept per store, not per session: each check uses channel
//! names of its own.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use holdpoint::Status;
use holdpoint::session::outbox::REMIND_AT;
use holdpoint::session::{EndpointStop, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxState, SessionStore};
use serde_json::json;

use super::capable::outbox;
use super::outbox::{events_of, held};
use super::{fresh_id, fresh_session, put};

/// A batch settles each row as one settle would (a lost claim fails only
/// its own); a stopped endpoint is listed, replaced by a second stop, and
/// re-enabled by a retry of a row that skipped it or by an explicit call;
/// listings page; the counts see a dead row.
pub async fn outbox_batches_pages_and_stopped_endpoints(store: Arc<dyn SessionStore>) {
    let before = outbox(&*store)
        .outbox_stats(Utc::now())
        .await
        .expect("outbox_stats failed");
    let a = put(&*store, None, held(&fresh_session(), json!(true)))
        .await
        .snapshot_id;
    let b = put(&*store, None, held(&fresh_session(), json!(true)))
        .await
        .snapshot_id;
    let now = Utc::now() + chrono::Duration::seconds(1);
    let lease = Duration::from_secs(30);
    // One claim takes every due row (this case's and others'); keep ours.
    let claimed = outbox(&*store)
        .claim_outbox(now, 100_000, lease)
        .await
        .expect("claim_outbox failed");
    let mine = |id: &str| {
        claimed
            .iter()
            .find(|l| l.event.snapshot_id == id)
            .cloned()
            .expect("claimed")
    };
    let (first, second) = (mine(&a), mine(&b));
    let channel = fresh_id("webhook");
    let results = outbox(&*store)
        .settle_outbox_batch(vec![
            OutboxSettle {
                id: first.event.id.clone(),
                token: first.token.clone(),
                outcome: OutboxOutcome::Delivered {
                    done: vec![channel.clone()],
                },
            },
            OutboxSettle {
                id: second.event.id.clone(),
                token: "not-the-token".into(),
                outcome: OutboxOutcome::Delivered { done: vec![] },
            },
        ])
        .await
        .expect("settle_outbox_batch failed");
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok(), "{results:?}");
    let lost = results[1]
        .as_ref()
        .expect_err("a settle with another token must be refused");
    assert_eq!(lost.status(), Status::FailedPrecondition, "{lost}");
    assert_eq!(events_of(&*store, &a).await[0].state, OutboxState::Delivered);
    assert_eq!(events_of(&*store, &b).await[0].state, OutboxState::Pending);
    // The row whose settle was refused is still claimed by its own token.
    outbox(&*store)
        .settle_outbox(
            &second.event.id,
            &second.token,
            OutboxOutcome::Dead {
                error: "HTTP 500".into(),
                done: vec![],
            },
        )
        .await
        .expect("the claim's own settle must pass");
    let after = outbox(&*store)
        .outbox_stats(Utc::now())
        .await
        .expect("outbox_stats failed");
    assert!(after.dead > before.dead, "{before:?} then {after:?}");

    // A stop is listed, and a second one replaces it.
    let stop = |reason: &str| EndpointStop {
        channel: channel.clone(),
        fingerprint: "f1".into(),
        reason: reason.into(),
        stopped_at: Utc::now(),
    };
    outbox(&*store)
        .stop_endpoint(stop("HTTP 410"))
        .await
        .expect("stop_endpoint failed");
    outbox(&*store)
        .stop_endpoint(stop("HTTP 410 again"))
        .await
        .expect("stop_endpoint failed");
    let mine = |all: Vec<EndpointStop>| all.into_iter().filter(|s| s.channel == channel).collect::<Vec<_>>();
    let listed = mine(
        outbox(&*store)
            .stopped_endpoints()
            .await
            .expect("stopped_endpoints failed"),
    );
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].fingerprint.as_str(), listed[0].reason.as_str()),
        ("f1", "HTTP 410 again")
    );
    // A retry of a row that skipped the stopped endpoint re-enables it and
    // sends there again.
    let retried = outbox(&*store)
        .retry_outbox(&first.event.id)
        .await
        .expect("retry_outbox failed")
        .expect("the row exists");
    assert_eq!(retried.state, OutboxState::Pending);
    assert!(!retried.done.contains(&channel), "{retried:?}");
    assert!(
        mine(
            outbox(&*store)
                .stopped_endpoints()
                .await
                .expect("stopped_endpoints failed")
        )
        .is_empty()
    );
    // A retried row that failed before is listed as retrying; one that did
    // not fail is not.
    outbox(&*store)
        .retry_outbox(&second.event.id)
        .await
        .expect("retry_outbox failed");
    let retrying = |snapshot: &str| OutboxQuery {
        state: Some(OutboxState::Pending),
        snapshot_id: Some(snapshot.to_owned()),
        retrying: true,
        ..OutboxQuery::default()
    };
    let listed = outbox(&*store)
        .list_outbox(&retrying(&b))
        .await
        .expect("list_outbox failed");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].last_error.as_deref(), Some("HTTP 500"));
    assert!(
        outbox(&*store)
            .list_outbox(&retrying(&a))
            .await
            .expect("list_outbox failed")
            .is_empty()
    );
    // An explicit re-enable.
    outbox(&*store)
        .stop_endpoint(stop("HTTP 410"))
        .await
        .expect("stop_endpoint failed");
    assert!(
        outbox(&*store)
            .enable_endpoint(&channel)
            .await
            .expect("enable_endpoint failed")
    );
    assert!(
        !outbox(&*store)
            .enable_endpoint(&channel)
            .await
            .expect("enable_endpoint failed")
    );

    // Pages: a hold with a reminder has two rows, oldest due first.
    let due = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let c = put(&*store, None, held(&fresh_session(), json!({ REMIND_AT: due })))
        .await
        .snapshot_id;
    let page = |offset: usize| OutboxQuery {
        snapshot_id: Some(c.clone()),
        limit: Some(1),
        offset: Some(offset),
        ..OutboxQuery::default()
    };
    let one = outbox(&*store).list_outbox(&page(0)).await.expect("list_outbox failed");
    let two = outbox(&*store).list_outbox(&page(1)).await.expect("list_outbox failed");
    let three = outbox(&*store).list_outbox(&page(2)).await.expect("list_outbox failed");
    assert_eq!(one.len(), 1);
    assert_eq!(two.len(), 1);
    assert!(three.is_empty(), "{three:?}");
    assert!(one[0].id != two[0].id && one[0].due_at <= two[0].due_at);
}
