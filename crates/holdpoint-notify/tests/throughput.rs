//! Deliveries per second to a loopback receiver, and the delay from hold to
//! delivery, per store (memory, SQLite, PostgreSQL when one is reachable).
//! A measurement, not a check: ignored by default. Each batch is one claim
//! and one settle round trip to the store; its rows are delivered 64 at a
//! time. The delay is from the hold's write (the event's `createdAt`, the
//! payload's `timestamp`) to the receiver taking it.
//!
//! `cargo test -p holdpoint-notify --test throughput -- --ignored --nocapture`
//! (`NOTIFY_BENCH_N` sets how many holds; default 2000).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use holdpoint::message::metadata;
use holdpoint::session::{InMemoryStore, SessionState, SessionStore, Snapshot};
use holdpoint::{FinishReason, Message, Part, Role};
use holdpoint_notify::{Notifier, NotifyConfig, RetryPolicy, Secret, WebhookSpec, Worker, WorkerOptions};
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Clone, Default)]
struct Sink {
    count: Arc<AtomicUsize>,
    delays_ms: Arc<Mutex<Vec<f64>>>,
}

async fn start_sink() -> (Sink, String) {
    let sink = Sink::default();
    async fn take(State(s): State<Sink>, body: Bytes) -> &'static str {
        let v: Value = serde_json::from_slice(&body).unwrap();
        let at = chrono::DateTime::parse_from_rfc3339(v["timestamp"].as_str().unwrap()).unwrap();
        let delay = (chrono::Utc::now() - at.with_timezone(&chrono::Utc))
            .num_microseconds()
            .unwrap() as f64
            / 1000.0;
        s.delays_ms.lock().await.push(delay);
        s.count.fetch_add(1, Ordering::Relaxed);
        "ok"
    }
    let app = Router::new().route("/hook", post(take)).with_state(sink.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (sink, format!("http://{addr}/hook"))
}

fn held(session: &str) -> Snapshot {
    let mut call = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 50000})));
    call.set_meta(metadata::INTERRUPT, json!({"approvers": ["finance"]}));
    let mut state = SessionState::new(session);
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![call])];
    let mut row = Snapshot::new(state);
    row.agent = Some("bank".into());
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

fn options() -> WorkerOptions {
    WorkerOptions {
        poll_interval: Duration::from_millis(5),
        batch: 256,
        concurrency: 64,
        lease: Duration::from_secs(60),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::default(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(name: &str, store: Arc<dyn SessionStore>, n: usize) {
    let (sink, url) = start_sink().await;
    let config = NotifyConfig {
        webhooks: vec![WebhookSpec {
            url: Secret::new(url),
            secret: Secret::new(format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(b"bench secret")
            )),
            ..Default::default()
        }],
        worker: options(),
        ..Default::default()
    };
    // Throughput: n holds written first, then drained.
    let writes = futures::future::join_all((0..n).map(|i| {
        let store = Arc::clone(&store);
        async move {
            let row = held(&format!("bench-{i}"));
            store
                .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
                .await
                .unwrap();
        }
    }));
    writes.await;
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config.clone()).unwrap()).unwrap();
    let started = Instant::now();
    while sink.count.load(Ordering::Relaxed) < n {
        worker.run_once().await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(600), "draining took too long");
    }
    let secs = started.elapsed().as_secs_f64();
    // Delay: holds written one by one while a spawned worker polls.
    sink.delays_ms.lock().await.clear();
    let before = sink.count.load(Ordering::Relaxed);
    let handle = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap())
        .unwrap()
        .spawn();
    let live = 200;
    for i in 0..live {
        let row = held(&format!("live-{i}"));
        store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let waited = Instant::now();
    while sink.count.load(Ordering::Relaxed) < before + live && waited.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    handle.shutdown().await;
    let mut delays = sink.delays_ms.lock().await.clone();
    delays.sort_by(f64::total_cmp);
    println!(
        "{name}: {n} deliveries in {secs:.2} s = {:.0}/s; hold→delivery p50 {:.1} ms, p99 {:.1} ms (poll {:?}, {} live)",
        n as f64 / secs,
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        options().poll_interval,
        delays.len()
    );
}

fn n() -> usize {
    std::env::var("NOTIFY_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn deliveries_per_second() {
    measure("memory", Arc::new(InMemoryStore::new()), n()).await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = holdpoint_store_sqlite::SqliteStore::open(dir.path().join("bench.db"))
        .await
        .unwrap();
    measure("sqlite", Arc::new(sqlite), n()).await;
    if let Some(pg) = holdpoint_testkit::TempPostgres::start_or_skip("deliveries_per_second") {
        let store = holdpoint_store_postgres::PostgresStore::connect(pg.url())
            .await
            .unwrap();
        measure("postgres", Arc::new(store), n()).await;
    }
}
