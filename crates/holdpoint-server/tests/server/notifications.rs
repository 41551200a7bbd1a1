//! The notification pipe over HTTP (docs/reference.md §11.3): operators
//! list the outbox and stopped endpoints, retry rows and re-enable
//! endpoints; `/metrics` counts deliveries, failures, dead letters and the
//! queue; no secret shows in a listing, an error, a log line or a metric.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use holdpoint::message::metadata;
use holdpoint::session::{InMemoryStore, SessionState, SessionStore, Snapshot};
use holdpoint::{FinishReason, Message, Part, Role};
use holdpoint_notify::{
    DeliveryObserver, Notifier, NotifyConfig, RetryPolicy, Secret, SlackSpec, WebhookSpec, Worker, WorkerOptions,
};
use holdpoint_server::auth::ApiKeys;
use holdpoint_server::{Metrics, OPERATOR_ROLE, Server};
use serde_json::json;

use crate::receivers::{Logs, Receiver};
use crate::support::{TestServer, assert_error, bank, user};

const OPERATOR_KEY: &str = "k-operator-0123456789abcdef";
const FINANCE_KEY: &str = "k-finance-0123456789abcdef";
/// Path segments that stand for tokens in endpoint URLs.
const HOOK_TOKEN: &str = "hooktoken-SECRET-7f3a";
const SLACK_TOKEN: &str = "T000/B000/slacktoken-SECRET-91c2";

/// The worker's reports into the server's metrics (what `holdpoint serve`
/// wires).
struct Observe(Metrics);

impl DeliveryObserver for Observe {
    fn delivered(&self, channel: &str, delay: Duration) {
        self.0.notification_delivered(channel, delay);
    }
    fn failed(&self, channel: &str) {
        self.0.notification_failed(channel);
    }
    fn dead(&self, kind: &str) {
        self.0.notification_dead(kind);
    }
    fn stopped(&self, channel: &str) {
        self.0.notification_endpoint_stopped(channel);
    }
    fn unrouted(&self, kind: &str) {
        self.0.notification_unrouted(kind);
    }
}

fn held(session: &str) -> Snapshot {
    let mut call = Part::tool_request("transferMoney", Some("r1".into()), Some(json!({"amount": 50000})));
    call.set_meta(metadata::INTERRUPT, json!({"approvers": ["finance"]}));
    let mut state = SessionState::new(session);
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![call])];
    let mut row = Snapshot::new(state);
    row.agent = Some("bankingAgent".into());
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

#[tokio::test(flavor = "current_thread")]
async fn operators_see_and_steer_the_pipe_and_no_secret_leaks() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_filter(tracing_subscriber::filter::Targets::new().with_target("holdpoint", tracing::Level::TRACE)),
    );
    let _logging = tracing::subscriber::set_default(subscriber);

    let (hook, hook_addr) = Receiver::start(vec![500; 64]).await;
    let (slack, slack_addr) = Receiver::start(vec![410, 410]).await;
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(b"a webhook secret of 32 bytes....")
    );
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let metrics = Metrics::new();
    let server = Server::builder()
        .agent(bank(Arc::clone(&store)))
        .api_keys(
            ApiKeys::new()
                .key_with_roles(OPERATOR_KEY, "oscar", [OPERATOR_ROLE])
                .key_with_roles(FINANCE_KEY, "fiona", ["finance"]),
        )
        .metrics(metrics.clone())
        .metrics_open(true)
        .notifications(Arc::clone(&store))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    let http = TestServer::start(server).await;

    let config = NotifyConfig {
        webhooks: vec![WebhookSpec {
            url: Secret::new(format!("http://{hook_addr}/hook/{HOOK_TOKEN}")),
            secret: Secret::new(secret.clone()),
            events: vec![],
            roles: vec![],
        }],
        slack: vec![SlackSpec {
            webhook_url: Secret::new(format!("http://{slack_addr}/services/{SLACK_TOKEN}")),
            events: vec![],
            roles: vec![],
        }],
        worker: WorkerOptions {
            poll_interval: Duration::from_millis(5),
            retry: RetryPolicy {
                base: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                max_attempts: 3,
            },
            ..WorkerOptions::default()
        },
        ..NotifyConfig::default()
    };
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap())
        .unwrap()
        .observer(Arc::new(Observe(metrics)));
    for session in ["s-pipe-1", "s-pipe-2"] {
        let row = held(session);
        store
            .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
            .await
            .unwrap();
    }
    // Two attempts each: the webhook fails (retrying), Slack answers 410
    // once and is stopped.
    for _ in 0..50 {
        worker.run_once().await.unwrap();
        let (_, listed) = http.get("/notifications?state=retrying", Some(OPERATOR_KEY)).await;
        let rows = listed["result"]["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if rows.len() == 2 && rows.iter().all(|r| r["attempts"] == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Both rows may be in flight to Slack before its first 410 comes
    // back; after that it gets nothing more.
    let stopped_hits = slack.hits.lock().unwrap().len();
    assert!((1..=2).contains(&stopped_hits), "{stopped_hits}");

    // Only operators get in.
    let refused = http.get("/notifications", Some(FINANCE_KEY)).await;
    assert_error(&refused, 403, "PERMISSION_DENIED", "operator");
    let anonymous = http.get("/notifications", None).await;
    assert_eq!(anonymous.0, StatusCode::UNAUTHORIZED);
    assert_error(
        &http.get("/notifications?state=lost", Some(OPERATOR_KEY)).await,
        400,
        "INVALID_ARGUMENT",
        "unknown state",
    );
    assert_error(
        &http.get("/notifications?limit=0", Some(OPERATOR_KEY)).await,
        400,
        "INVALID_ARGUMENT",
        "limit",
    );

    let (status, listed) = http.get("/notifications?state=retrying", Some(OPERATOR_KEY)).await;
    assert_eq!(status, StatusCode::OK, "{listed:#}");
    let rows = listed["result"]["notifications"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "{listed:#}");
    for row in &rows {
        assert_eq!(row["state"], "retrying");
        assert_eq!(row["type"], "hold.created");
        assert_eq!(row["attempts"], 2);
        assert_eq!(row["tool"], "transferMoney");
        assert!(
            row["lastError"].as_str().unwrap().contains("webhook:0: HTTP 500"),
            "{row:#}"
        );
        assert_eq!(row["done"], json!(["slack:0"]));
        assert!(row.get("input").is_none() && row.get("data").is_none(), "{row:#}");
    }
    assert_eq!(listed["result"]["endpoints"][0]["channel"], "slack:0");
    assert_eq!(listed["result"]["endpoints"][0]["state"], "stopped");
    // Pages.
    let (_, first) = http.get("/notifications?limit=1", Some(OPERATOR_KEY)).await;
    assert_eq!(first["result"]["notifications"].as_array().unwrap().len(), 1);
    assert_eq!(first["result"]["nextOffset"], 1);
    let (_, last) = http.get("/notifications?limit=1&offset=1", Some(OPERATOR_KEY)).await;
    assert_eq!(last["result"]["notifications"].as_array().unwrap().len(), 1);
    assert!(last["result"].get("nextOffset").is_none(), "{last:#}");
    assert_ne!(
        first["result"]["notifications"][0]["id"],
        last["result"]["notifications"][0]["id"]
    );

    // The metrics count the pipe.
    let scraped = http.metrics().await;
    let value = |name: &str, labels: &[(&str, &str)]| crate::support::sample(&scraped, name, labels);
    assert_eq!(
        value("holdpoint_notify_failures_total", &[("channel", "webhook:0")]),
        4.0,
        "{scraped}"
    );
    assert_eq!(
        value("holdpoint_notify_endpoint_stops_total", &[("channel", "slack:0")]),
        stopped_hits as f64
    );
    assert_eq!(value("holdpoint_notify_queue_retrying", &[]), 2.0);
    assert_eq!(value("holdpoint_notify_endpoints_stopped", &[]), 1.0);
    assert!(
        scraped.contains("# TYPE holdpoint_notify_queue_age_seconds gauge"),
        "{scraped}"
    );
    assert!(scraped.contains("# TYPE holdpoint_notify_delivery_delay_seconds histogram"));

    // The last attempt makes a row dead: listed and counted as a dead
    // letter.
    for _ in 0..50 {
        worker.run_once().await.unwrap();
        let (_, dead) = http.get("/notifications?state=dead", Some(OPERATOR_KEY)).await;
        if dead["result"]["notifications"].as_array().is_some_and(|a| a.len() == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let scraped = http.metrics().await;
    assert_eq!(
        crate::support::sample(
            &scraped,
            "holdpoint_notify_dead_letters_total",
            &[("type", "hold.created")]
        ),
        2.0,
        "{scraped}"
    );
    assert_eq!(
        crate::support::sample(&scraped, "holdpoint_notify_queue_dead", &[]),
        2.0
    );

    // A retry makes the row due again and re-enables the endpoint it
    // skipped; the receivers now answer 200.
    hook.script.lock().unwrap().clear();
    let id = rows[0]["id"].as_str().unwrap().to_owned();
    let (status, retried) = http
        .post(&format!("/notifications/{id}/retry"), json!({}), Some(OPERATOR_KEY))
        .await;
    assert_eq!(status, StatusCode::OK, "{retried:#}");
    assert_eq!(retried["result"]["attempts"], 0);
    let (_, listed) = http.get("/notifications", Some(OPERATOR_KEY)).await;
    assert_eq!(listed["result"]["endpoints"], json!([]), "{listed:#}");
    assert_error(
        &http
            .post("/notifications/msg_none/retry", json!({}), Some(OPERATOR_KEY))
            .await,
        404,
        "NOT_FOUND",
        "msg_none",
    );
    assert_error(
        &http
            .post("/notifications/msg_none/retry", json!({}), Some(FINANCE_KEY))
            .await,
        403,
        "PERMISSION_DENIED",
        "operator",
    );
    assert_error(
        &http
            .post("/notifications/endpoints/slack:0/enable", json!({}), Some(OPERATOR_KEY))
            .await,
        404,
        "NOT_FOUND",
        "not stopped",
    );
    for _ in 0..50 {
        worker.run_once().await.unwrap();
        if slack.hits.lock().unwrap().len() == stopped_hits + 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        slack.hits.lock().unwrap().len(),
        stopped_hits + 1,
        "the re-enabled endpoint gets the retried row"
    );
    let scraped = http.metrics().await;
    assert!(
        crate::support::sample(
            &scraped,
            "holdpoint_notify_deliveries_total",
            &[("channel", "webhook:0")]
        ) >= 1.0
    );

    // No secret anywhere: listings, errors, metrics, logs.
    let (_, everything) = http.get("/notifications?limit=1000", Some(OPERATOR_KEY)).await;
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("notify.delivery"),
        "the delivery spans are logged: {logged}"
    );
    let raw_secret = secret.trim_start_matches("whsec_");
    for (what, text) in [
        ("listing", everything.to_string()),
        ("metrics", scraped),
        ("logs", logged),
    ] {
        for leak in [HOOK_TOKEN, "slacktoken", secret.as_str(), raw_secret] {
            assert!(!text.contains(leak), "{what} leaks {leak:?}");
        }
    }
}

const ALICE_KEY: &str = "k-alice-0123456789abcdef";

/// The worker's channels from a configuration file's `[notify]` tables, as
/// `holdpoint serve` takes them (the file's own `NotifyConfig`), polling
/// fast for the test.
fn notify_config(config: &holdpoint_deploy::Config) -> NotifyConfig {
    NotifyConfig {
        worker: WorkerOptions {
            poll_interval: Duration::from_millis(5),
            ..WorkerOptions::default()
        },
        ..config.notify().clone()
    }
}

/// From the configuration file to the receiver: a rule's `remind_after`
/// holds a transfer made over HTTP, and its `hold.reminded` reaches a
/// webhook configured with `events = ["hold.reminded"]` and one with no
/// `events` (all), addressed to the rule's approvers like the first
/// notice; the operators' listing shows the reminder delivered to both.
#[tokio::test]
async fn a_configured_reminder_reaches_the_webhooks_that_take_it() {
    // The other test here reads the worker's spans from its log lines, and
    // tracing caches a callsite's interest for every thread: a span first
    // met here, with no subscriber wanting it, could be cached as unwanted
    // there. Under a subscriber that wants them too, it never is.
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let _logging =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_filter(
                tracing_subscriber::filter::Targets::new().with_target("holdpoint", tracing::Level::TRACE),
            ),
        ));
    let (hooks, addr) = Receiver::start(vec![]).await;
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(b"a webhook secret of 32 bytes....")
    );
    let config = holdpoint_deploy::Config::parse(
        &format!(
            r#"
public_url = "https://holdpoint.example"

[[auth.api_keys]]
principal = "alice"
key = "{ALICE_KEY}"
roles = ["customer"]

[[auth.api_keys]]
principal = "fiona"
key = "{FINANCE_KEY}"
roles = ["finance"]

[[auth.api_keys]]
principal = "oscar"
key = "{OPERATOR_KEY}"
roles = ["{OPERATOR_ROLE}"]

[[approval.rules]]
agent = "bankingAgent"
tool = "transferMoney"
approvers = ["finance"]
remind_after = "300ms"

[[notify.webhooks]]
url = "http://{addr}/reminders"
secret = "{secret}"
events = ["hold.reminded"]

[[notify.webhooks]]
url = "http://{addr}/everything"
secret = "{secret}"
"#
        ),
        "holdpoint.toml",
    )
    .unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let agent = crate::bank::builder("bankingAgent")
        .approval_policy(config.approval_policy())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let builder = Server::builder()
        .agent(agent)
        .notifications(Arc::clone(&store))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap());
    let http = TestServer::start(config.apply_auth(builder).unwrap().build().unwrap()).await;
    let worker = Worker::new(Arc::clone(&store), Notifier::new(notify_config(&config)).unwrap()).unwrap();

    let (status, held) = http
        .post(
            "/agents/bankingAgent",
            json!({"data": user("Transfer $50000 to acme")}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{held:#}");
    let snapshot_id = held["result"]["snapshotId"].clone();
    assert!(snapshot_id.is_string(), "the transfer is held: {held:#}");

    let reminded = |path: &str| {
        hooks
            .bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, b)| p == path && b["type"] == "hold.reminded")
            .map(|(_, b)| b.clone())
            .collect::<Vec<_>>()
    };
    for _ in 0..600 {
        worker.run_once().await.unwrap();
        if !reminded("/reminders").is_empty() && !reminded("/everything").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = reminded("/reminders");
    assert_eq!(got.len(), 1, "{:?}", hooks.bodies.lock().unwrap());
    assert_eq!(reminded("/everything").len(), 1);
    let created: Vec<_> = hooks
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, b)| b["type"] == "hold.created")
        .map(|(p, b)| (p.clone(), b.clone()))
        .collect();
    assert_eq!(created.len(), 1, "only the default webhook takes hold.created");
    assert_eq!(created[0].0, "/everything");
    let data = &got[0]["data"];
    assert_eq!(data["snapshotId"], snapshot_id);
    assert_eq!(data["tool"], "transferMoney");
    assert_eq!(data["approvers"], json!(["finance"]));
    assert_eq!(data["approvers"], created[0].1["data"]["approvers"]);
    // The rule's `remind_after`, stamped on the hold.
    assert!(data["interrupt"]["remindAt"].is_string(), "{data:#}");

    let (status, listed) = http.get("/notifications?limit=100", Some(OPERATOR_KEY)).await;
    assert_eq!(status, StatusCode::OK, "{listed:#}");
    let rows = listed["result"]["notifications"].as_array().unwrap();
    let row = rows.iter().find(|r| r["type"] == "hold.reminded").unwrap();
    assert_eq!(row["state"], "delivered", "{row:#}");
    assert_eq!(row["done"], json!(["timer", "webhook:0", "webhook:1"]), "{row:#}");
}

/// An event no channel takes is counted on `/metrics` by its type
/// (`holdpoint_notify_unrouted_total`), never as a delivery: the routing
/// gap an operator must see.
#[tokio::test]
async fn events_no_channel_takes_are_counted_as_unrouted_on_metrics() {
    let (hook, hook_addr) = Receiver::start(vec![]).await;
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let metrics = Metrics::new();
    let server = Server::builder()
        .agent(bank(Arc::clone(&store)))
        .metrics(metrics.clone())
        .metrics_open(true)
        .build()
        .unwrap();
    let http = TestServer::start(server).await;
    let config = NotifyConfig {
        webhooks: vec![WebhookSpec {
            url: Secret::new(format!("http://{hook_addr}/hook/{HOOK_TOKEN}")),
            secret: Secret::new(format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(b"a webhook secret of 32 bytes....")
            )),
            // Takes decisions only: a new hold reaches nobody.
            events: vec!["hold.decided".into()],
            roles: vec![],
        }],
        worker: WorkerOptions {
            poll_interval: Duration::from_millis(5),
            ..WorkerOptions::default()
        },
        ..NotifyConfig::default()
    };
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap())
        .unwrap()
        .observer(Arc::new(Observe(metrics)));
    let row = held("s-unrouted");
    store
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap();
    for _ in 0..50 {
        worker.run_once().await.unwrap();
        if worker.metrics().snapshot().unrouted > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let scraped = http.metrics().await;
    let unrouted = crate::support::sample(&scraped, "holdpoint_notify_unrouted_total", &[("type", "hold.created")]);
    assert_eq!(unrouted, 1.0, "{scraped}");
    assert!(
        !scraped.contains("holdpoint_notify_deliveries_total{"),
        "nothing was delivered: {scraped}"
    );
    assert!(hook.hits.lock().unwrap().is_empty());
}
