//! Load: many paused sessions and many concurrent SSE streams on one
//! server with the in-memory store — no errors, bounded memory, p99
//! latencies printed. `HOLDPOINT_LOAD_SCALE` (default 1) multiplies the
//! counts; `scripts/soak.sh` runs it longer.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use futures::StreamExt;
use holdpoint_server::Server;
use serde_json::json;

use crate::support::*;

fn scale() -> usize {
    std::env::var("HOLDPOINT_LOAD_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples
        .get((samples.len() * 99 / 100).min(samples.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_sessions_and_concurrent_streams_under_load() {
    let paused_target = 10_000 * scale();
    let streams = 1_000 * scale();
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    // Room for every stream and the turns beside them: this measures the
    // server under load, not its connection bound.
    let s = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), runs))
            .max_connections(streams + 256)
            .build()
            .unwrap(),
    )
    .await;
    let rss_before = rss_kib();
    let started = Instant::now();

    // Paused sessions, 64 requests in flight.
    let client = reqwest::Client::new();
    let url = s.url("/agents/opsAgent");
    let turns: Vec<Result<Duration, String>> = futures::stream::iter(0..paused_target)
        .map(|i| {
            let client = client.clone();
            let url = url.clone();
            async move {
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .json(&json!({"data": user(&format!("close acct-{i}"))}))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let code = r.status();
                let body: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
                if code != 200 || body["result"]["finishReason"] != "interrupted" {
                    return Err(format!("{code} {body}"));
                }
                Ok(t.elapsed())
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let errors: Vec<_> = turns.iter().filter_map(|r| r.as_ref().err()).take(3).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let turn_p99 = p99(turns.into_iter().flatten().collect());
    let paused_took = started.elapsed();

    // Concurrent SSE streams, all open at once, each on a connection of its
    // own: a client that reused the pooled connections of the phase above
    // could pick one the server is closing as idle just then (hyper's
    // "connection closed before message completed"), a client race, not
    // the server's behaviour under load.
    let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let started_streams = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|i| {
            let client = fresh.clone();
            let url = format!("{url}?stream=true");
            tokio::spawn(async move {
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .json(&json!({"data": user(&format!("close stream-{i}"))}))
                    .send()
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                if r.status() != 200 {
                    return Err(format!("status {}", r.status()));
                }
                let text = r.text().await.map_err(|e| e.to_string())?;
                if !text.contains("\"result\"") || text.contains("\"error\"") {
                    return Err(format!("stream without a result: {text}"));
                }
                Ok::<_, String>(t.elapsed())
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(d) => latencies.push(d),
            Err(e) => panic!("a stream failed: {e}"),
        }
    }
    let stream_p99 = p99(latencies);
    let streams_took = started_streams.elapsed();

    // Everything is there and listable; the pending listing is timed too.
    let t = Instant::now();
    let text = s.metrics().await;
    let scrape = t.elapsed();
    let pending = sample(&text, "holdpoint_pending_approvals", &[("agent", "opsAgent")]);
    assert_eq!(pending as usize, paused_target + streams, "every paused call is listed");
    assert_eq!(sample(&text, "holdpoint_http_errors_total", &[]), 0.0, "no errors");
    let rss_after = rss_kib();
    let grown_mib = match (rss_before, rss_after) {
        (Some(b), Some(a)) => a.saturating_sub(b) / 1024,
        _ => 0,
    };
    println!(
        "load: {paused_target} paused in {paused_took:?} (p99 {turn_p99:?}); {streams} concurrent SSE streams in {streams_took:?} (p99 {stream_p99:?}); /metrics scrape {scrape:?}; RSS +{grown_mib} MiB"
    );
    // ~11k sessions of a few KiB each: far below this bound.
    let bound = 400 * scale() as u64;
    assert!(grown_mib < bound, "memory grew {grown_mib} MiB (bound {bound} MiB)");
}
