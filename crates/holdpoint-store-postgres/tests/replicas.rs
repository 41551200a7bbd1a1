//! Two handles (two pools, as two replicas would have) on one database.

use std::sync::Arc;

use holdpoint::Status;
use holdpoint::session::{SessionState, SessionStore, Snapshot};
use holdpoint_store_postgres::{PostgresStore, PostgresStoreOptions};
use holdpoint_testkit::TempPostgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_pass_the_two_handle_suite() {
    let Some(pg) = TempPostgres::start_or_skip("two_replicas_pass_the_two_handle_suite") else {
        return;
    };
    // Started together: migrations must not collide.
    let (a, b) = tokio::join!(PostgresStore::connect(pg.url()), PostgresStore::connect(pg.url()));
    holdpoint_testkit::run_two_handle_suite(Arc::new(a.unwrap()), Arc::new(b.unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_unavailable_and_nothing_half_written() {
    let Some(pg) = TempPostgres::start_private_or_skip("a_stopped_server_is_unavailable_and_nothing_half_written")
    else {
        return;
    };
    let url = pg.url().to_owned();
    let options = PostgresStoreOptions::new(&url)
        .unwrap()
        .acquire_timeout(std::time::Duration::from_secs(2));
    let store = PostgresStore::connect_with(options).await.unwrap();
    let row = Snapshot::new(SessionState::new("s-down"));
    store
        .save_snapshot(Some("before"), Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap();
    drop(pg); // stops the server
    let err = store.get_snapshot("before").await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
    let err = store
        .save_snapshot(
            Some("after"),
            Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s-down"))))),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
    let err = PostgresStore::connect_with(
        PostgresStoreOptions::new(&url)
            .unwrap()
            .acquire_timeout(std::time::Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable, "{err}");
}

#[tokio::test]
async fn bad_urls_are_invalid_arguments() {
    let err = PostgresStore::connect("postgres://user:secret@[::1").await.unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    assert!(!err.to_string().contains("secret"), "the password leaked: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_through_two_replicas_is_exactly_once() {
    let Some(pg) = TempPostgres::start_or_skip("resume_through_two_replicas_is_exactly_once") else {
        return;
    };
    let a = PostgresStore::connect(pg.url()).await.unwrap();
    let b = PostgresStore::connect(pg.url()).await.unwrap();
    holdpoint_testkit::resume::exactly_once_resume(Arc::new(a), Arc::new(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_a_channel_writes_only_the_timers_that_act() {
    use holdpoint::session::outbox::OutboxWrites;
    let Some(pg) = TempPostgres::start_or_skip("a_replica_without_a_channel_writes_only_the_timers_that_act") else {
        return;
    };
    let options = PostgresStoreOptions::new(pg.url())
        .unwrap()
        .outbox_writes(OutboxWrites::Timers);
    let timers = PostgresStore::connect_with(options).await.unwrap();
    let all = PostgresStore::connect(pg.url()).await.unwrap();
    holdpoint_testkit::store_suite::a_store_without_a_channel_writes_only_the_timers_that_act(
        Arc::new(timers),
        Arc::new(all),
    )
    .await;
}
