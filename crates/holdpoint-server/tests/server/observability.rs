//! `GET /metrics`: what a Prometheus scrape sees after real turns.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use holdpoint_server::{Metrics, Server};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn metrics_count_turns_holds_waits_tools_errors_and_store_latency() {
    let metrics = Metrics::new();
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = ops_with(
        "opsAgent",
        metrics.store(store.clone()),
        runs.clone(),
        None,
        Some(metrics.middleware()),
    );
    let s = TestServer::start(
        Server::builder()
            .agent(agent)
            .metrics(metrics.clone())
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;

    let text = s.metrics().await;
    assert!(text.contains("# TYPE holdpoint_pending_approvals gauge"), "{text}");
    assert!(
        text.contains("# TYPE holdpoint_approval_wait_seconds histogram"),
        "{text}"
    );
    assert_eq!(
        sample(&text, "holdpoint_pending_approvals", &[("agent", "opsAgent")]),
        0.0
    );

    for account in ["a-1", "a-2"] {
        let (code, body) = s
            .post(
                "/agents/opsAgent",
                json!({"data": user(&format!("close {account}"))}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
        assert_eq!(body["result"]["finishReason"], "interrupted");
    }
    let text = s.metrics().await;
    let ops = [("agent", "opsAgent")];
    assert_eq!(sample(&text, "holdpoint_pending_approvals", &ops), 2.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "holdpoint_turns_total",
            &[("agent", "opsAgent"), ("finish_reason", "interrupted")]
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            "holdpoint_tool_calls_total",
            &[("tool", "closeAccount"), ("outcome", "interrupt")]
        ),
        2.0,
        "{text}"
    );
    assert!(sample(&text, "holdpoint_model_calls_total", &[("outcome", "ok")]) >= 2.0);

    // Approve one: the wait is observed, the hold leaves the gauge, the tool ran.
    let (_, list) = s.get("/agents/opsAgent/pending", None).await;
    let item = list["result"][0].clone();
    let approve = restart(&item["part"], json!({"toolApproved": true}));
    let reads = |text: &str| {
        sample(
            text,
            "holdpoint_store_operation_seconds_count",
            &[("op", "get_snapshot")],
        )
    };
    let read_before = reads(&s.metrics().await);
    let (code, body) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [approve.clone()]}}, "init": {"snapshotId": item["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    // The server reads the paused snapshot once (to restore the inputs'
    // number forms) and hands it to the agent, which does not read it again.
    assert_eq!(reads(&s.metrics().await) - read_before, 1.0);
    // The same answer again loses the claim: a 409 counted as ABORTED.
    let (code, _) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [approve]}}, "init": {"snapshotId": item["snapshotId"]}}),
            None,
        )
        .await;
    assert_eq!(code, 409);
    let _ = s.get("/nowhere", None).await;

    let text = s.metrics().await;
    assert_eq!(sample(&text, "holdpoint_pending_approvals", &ops), 1.0, "{text}");
    assert!(sample(&text, "holdpoint_pending_oldest_seconds", &ops) >= 0.0);
    assert_eq!(
        sample(&text, "holdpoint_approval_wait_seconds_count", &ops),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "holdpoint_tool_calls_total",
            &[("tool", "closeAccount"), ("outcome", "output")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "holdpoint_turns_total",
            &[("agent", "opsAgent"), ("finish_reason", "stop")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "holdpoint_http_errors_total",
            &[("code", "409"), ("status", "ABORTED")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "holdpoint_http_errors_total",
            &[("code", "404"), ("status", "NOT_FOUND")]
        ),
        1.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            "holdpoint_http_requests_total",
            &[("route", "/agents/{name}"), ("method", "POST"), ("code", "200")]
        ) >= 3.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            "holdpoint_store_operation_seconds_count",
            &[("op", "claim_resume")]
        ) >= 1.0,
        "{text}"
    );
    // A resume's outcome is an insert under its successor id; the other
    // turns' snapshots are saves.
    let inserts = sample(
        &text,
        "holdpoint_store_operation_seconds_count",
        &[("op", "insert_snapshot")],
    );
    assert!(inserts >= 1.0, "{text}");
    assert!(
        sample(
            &text,
            "holdpoint_store_operation_seconds_count",
            &[("op", "save_snapshot")]
        ) + inserts
            >= 3.0,
        "{text}"
    );
    assert_eq!(sample(&text, "holdpoint_turns_running", &[]), 0.0);
}

#[tokio::test]
async fn a_metrics_token_guards_the_scrape() {
    let s = TestServer::start(
        Server::builder()
            .agent(bank(memory()))
            .metrics_token("scrape-token-0123456789")
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let got = s.get("/metrics", None).await;
    assert_error(&got, 401, "UNAUTHENTICATED", "token");
    let r = s
        .client
        .get(s.url("/metrics"))
        .bearer_auth("scrape-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(r.text().await.unwrap().contains("holdpoint_http_requests_total"));
}
