//! Delivery against real parts on loopback: an axum HTTP receiver, the PyPI
//! `standardwebhooks` verifier, and an `aiosmtpd` SMTP server.
//!
//! The Python parts are skipped with a message when Python or the packages
//! are missing, unless `CI` is set (then they fail).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine;
use chrono::Utc;
use holdpoint::message::metadata;
use holdpoint::session::OutboxStore;
use holdpoint::session::outbox::{HOLD_CREATED, HOLD_DECIDED, HOLD_EXPIRED, HOLD_REMINDED};
use holdpoint::session::{HoldTimers, InMemoryStore, OutboxQuery, OutboxState, SessionState, SessionStore, Snapshot};
use holdpoint::{FinishReason, Message, Part, Role};
use holdpoint_notify::{
    DeliveryObserver, EmailSpec, ExpireOutcome, HoldActions, HoldRef, Notifier, NotifyConfig, NotifyError, RetryPolicy,
    Secret, SlackSpec, SmtpSpec, SmtpTls, WebhookSpec, Worker, WorkerOptions,
};
use serde_json::{Value, json};

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A loopback HTTP receiver that answers with the statuses in `script`
/// (then 200) and records every request.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<u16>>>,
}

impl Receiver {
    async fn start(script: &[u16]) -> (Self, SocketAddr) {
        let receiver = Receiver::default();
        receiver.script.lock().unwrap().extend(script);
        async fn take(State(r): State<Receiver>, uri: axum::http::Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
            r.got.lock().unwrap().push(Received {
                path: uri.path().to_owned(),
                headers,
                body,
            });
            let next = r.script.lock().unwrap().pop_front().unwrap_or(200);
            StatusCode::from_u16(next).unwrap()
        }
        let app = Router::new().route("/{*path}", post(take)).with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, addr)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    fn on(&self, path: &str) -> Vec<Received> {
        self.got().into_iter().filter(|r| r.path == path).collect()
    }
}

fn secret() -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(b"a test secret of thirty-two bytes")
    )
}

fn fast() -> WorkerOptions {
    WorkerOptions {
        poll_interval: Duration::from_millis(5),
        batch: 64,
        concurrency: 8,
        lease: Duration::from_secs(30),
        timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            base: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_attempts: 5,
        },
    }
}

fn webhook(addr: SocketAddr, path: &str) -> WebhookSpec {
    WebhookSpec {
        url: Secret::new(format!("http://{addr}{path}")),
        secret: Secret::new(secret()),
        events: vec![],
        roles: vec![],
    }
}

/// A snapshot waiting on one held $50 000 `transferMoney` call for finance.
fn held(session: &str, extra: Value) -> Snapshot {
    let mut interrupt = json!({"approvers": ["finance"], "rule": "big transfers"});
    if let (Some(i), Value::Object(more)) = (interrupt.as_object_mut(), extra) {
        i.extend(more);
    }
    let mut call = Part::tool_request(
        "transferMoney",
        Some("r1".into()),
        Some(json!({"amount": 50000, "to": "ACME"})),
    );
    call.set_meta(metadata::INTERRUPT, interrupt);
    let mut state = SessionState::new(session);
    state.messages = vec![Message::user_text("pay"), Message::new(Role::Model, vec![call])];
    let mut row = Snapshot::new(state);
    row.agent = Some("bankingAgent".into());
    row.finish_reason = Some(FinishReason::Interrupted);
    row
}

async fn hold(store: &dyn SessionStore, session: &str, extra: Value) -> String {
    let row = held(session, extra);
    store
        .save_snapshot(None, Box::new(move |_| Ok(Some(row))))
        .await
        .unwrap()
        .unwrap()
        .snapshot_id
}

/// Runs the worker's batches until `done` holds (bounded).
async fn drive(worker: &Worker, mut done: impl FnMut() -> bool) {
    for _ in 0..400 {
        worker.run_once().await.unwrap();
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the worker did not get there");
}

async fn states(store: &dyn SessionStore) -> Vec<(String, OutboxState)> {
    store
        .capabilities()
        .outbox()
        .unwrap()
        .list_outbox(&OutboxQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.state))
        .collect()
}

/// Whether the Python parts can run; `false` (with a message) skips,
/// under CI a missing part fails.
fn python_has(module: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 with `{module}` is required under CI (pip install standardwebhooks aiosmtpd)"
        );
        eprintln!("skipping: python3 with `{module}` not found (pip install standardwebhooks aiosmtpd)");
    }
    ok
}

/// Verifies `r` with the PyPI `standardwebhooks` package.
fn verify_with_python(r: &Received, secret: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    let headers = dir.path().join("headers.json");
    std::fs::write(&body, &r.body).unwrap();
    let map: serde_json::Map<String, Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), Value::String(v.to_str().unwrap().to_owned())))
        .collect();
    std::fs::write(&headers, serde_json::to_vec(&map).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verify_webhook.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(secret)
        .arg(&body)
        .arg(&headers)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_the_same_signed_event_three_times_and_nothing_else() {
    let (receiver, addr) = Receiver::start(&[500, 500]).await;
    let store = Arc::new(InMemoryStore::new());
    let snapshot_id = hold(&*store, "s-retry", json!({})).await;
    let config = NotifyConfig {
        public_url: Some("https://holdpoint.example/".into()),
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap()).unwrap();
    let settled = || {
        let store = store.clone();
        futures::executor::block_on(states(&*store))
            .iter()
            .all(|(_, s)| *s == OutboxState::Delivered)
    };
    drive(&worker, settled).await;
    // A few more rounds: nothing else is sent.
    for _ in 0..5 {
        worker.run_once().await.unwrap();
    }
    let got = receiver.on("/hook");
    assert_eq!(got.len(), 3, "{got:?}");
    let ids: Vec<&str> = got.iter().map(|r| r.headers["webhook-id"].to_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the body is the same on every attempt"
    );
    let body: Value = serde_json::from_slice(&got[2].body).unwrap();
    assert_eq!(body["type"], HOLD_CREATED);
    assert!(body["timestamp"].is_string());
    let data = &body["data"];
    assert_eq!(data["agent"], "bankingAgent");
    assert_eq!(data["sessionId"], "s-retry");
    assert_eq!(data["snapshotId"], Value::String(snapshot_id.clone()));
    assert_eq!(data["ref"], "r1");
    assert_eq!(data["tool"], "transferMoney");
    assert_eq!(data["input"]["amount"], 50000);
    assert_eq!(data["approvers"], json!(["finance"]));
    assert_eq!(data["decisions"], json!([]));
    assert_eq!(data["interrupt"]["rule"], "big transfers");
    let url = data["url"].as_str().unwrap();
    assert!(url.starts_with("https://holdpoint.example/?"), "{url}");
    assert!(url.contains(&format!("snapshotId={snapshot_id}")), "{url}");
    // The crate's own verifier accepts every attempt …
    let verifier = standardwebhooks::Webhook::new(&secret()).unwrap();
    for r in &got {
        verifier.verify(&r.body, &r.headers).unwrap();
    }
    // … and so does an independent implementation.
    if python_has("standardwebhooks") {
        for r in &got {
            verify_with_python(r, &secret()).unwrap();
        }
        let mut forged = got[0].clone();
        forged.body = Bytes::from(String::from_utf8_lossy(&forged.body).replace("50000", "5"));
        assert!(
            verify_with_python(&forged, &secret()).is_err(),
            "a changed body must not verify"
        );
    }
    let outbox = store.list_outbox(&OutboxQuery::default()).await.unwrap();
    assert_eq!(outbox[0].attempts, 3);
    assert_eq!(outbox[0].done, ["webhook:0"]);
}

#[tokio::test]
async fn a_410_stops_the_endpoint_durably_until_a_retry_re_enables_it() {
    let (receiver, addr) = Receiver::start(&[410]).await;
    let (failing, failing_addr) = Receiver::start(&[500; 64]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outbox.db");
    let config = || NotifyConfig {
        webhooks: vec![webhook(addr, "/gone"), webhook(failing_addr, "/down")],
        worker: fast(),
        ..Default::default()
    };
    let settled = |store: &dyn SessionStore| {
        futures::executor::block_on(states(store))
            .iter()
            .all(|(_, s)| *s != OutboxState::Pending)
    };
    let first_id = {
        let store = Arc::new(holdpoint_store_sqlite::SqliteStore::open(&path).await.unwrap());
        hold(&*store, "s-gone-1", json!({})).await;
        let worker = Worker::new(store.clone(), Notifier::new(config()).unwrap()).unwrap();
        drive(&worker, || settled(&*store)).await;
        // The 410 endpoint was asked once; the failing one until the last
        // attempt.
        assert_eq!(receiver.on("/gone").len(), 1);
        assert_eq!(failing.on("/down").len(), 5);
        let events = store.list_outbox(&OutboxQuery::default()).await.unwrap();
        assert_eq!(events[0].state, OutboxState::Dead);
        assert_eq!(events[0].done, ["webhook:0"]);
        let error = events[0].last_error.clone().unwrap();
        assert!(error.contains("webhook:1: HTTP 500"), "{error}");
        assert!(
            !error.contains("127.0.0.1"),
            "errors name the channel, not its URL: {error}"
        );
        // The stop is in the store, named by channel and a fingerprint of
        // the URL (never the URL).
        let stops = store.stopped_endpoints().await.unwrap();
        assert_eq!(stops.len(), 1, "{stops:?}");
        assert_eq!(stops[0].channel, "webhook:0");
        assert!(!stops[0].fingerprint.is_empty() && !stops[0].fingerprint.contains("127.0.0.1"));
        store.close().await;
        events[0].id.clone()
    };

    // After a restart (a new store handle, a new worker) the endpoint is
    // still stopped: a later hold goes nowhere near it.
    let store = Arc::new(holdpoint_store_sqlite::SqliteStore::open(&path).await.unwrap());
    let worker = Worker::new(store.clone(), Notifier::new(config()).unwrap()).unwrap();
    failing.script.lock().unwrap().clear();
    hold(&*store, "s-gone-2", json!({})).await;
    drive(&worker, || settled(&*store)).await;
    assert_eq!(receiver.on("/gone").len(), 1, "a stopped endpoint gets nothing more");
    assert_eq!(failing.on("/down").len(), 6);

    // An operator's retry of the dead row re-enables the endpoint, and the
    // row goes there again (and only that row).
    let retried = store.retry_outbox(&first_id).await.unwrap().unwrap();
    assert_eq!(retried.state, OutboxState::Pending);
    assert!(store.stopped_endpoints().await.unwrap().is_empty());
    drive(&worker, || settled(&*store)).await;
    assert_eq!(receiver.on("/gone").len(), 2);
    let states = states(&*store).await;
    assert!(states.iter().all(|(_, s)| *s == OutboxState::Delivered), "{states:?}");
}

#[tokio::test]
async fn slack_gets_a_block_kit_message_and_routing_follows_roles() {
    let (receiver, addr) = Receiver::start(&[]).await;
    let store = Arc::new(InMemoryStore::new());
    let expires = (Utc::now() + chrono::Duration::hours(24)).to_rfc3339();
    hold(&*store, "s-slack", json!({"expiresAt": expires})).await;
    let slack = |path: &str, roles: &[&str]| SlackSpec {
        webhook_url: Secret::new(format!("http://{addr}{path}")),
        events: vec![HOLD_CREATED.into()],
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
    };
    let config = NotifyConfig {
        public_url: Some("https://holdpoint.example".into()),
        slack: vec![slack("/finance", &["finance"]), slack("/hr", &["hr"])],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap()).unwrap();
    drive(&worker, || !receiver.on("/finance").is_empty()).await;
    worker.run_once().await.unwrap();
    assert!(
        receiver.on("/hr").is_empty(),
        "finance's hold does not go to hr's channel"
    );
    let got = receiver.on("/finance");
    assert_eq!(got.len(), 1);
    let message: Value = serde_json::from_slice(&got[0].body).unwrap();
    let text = message.to_string();
    assert_eq!(message["blocks"][0]["type"], "header");
    assert!(text.contains("transferMoney"), "{text}");
    assert!(text.contains("amount: 50000"), "{text}");
    assert!(text.contains("to: ACME"), "{text}");
    assert!(text.contains("*Who may approve*\\nfinance"), "{text}");
    assert!(text.contains("*Expires*"), "{text}");
    let button = &message["blocks"][3]["elements"][0];
    assert!(
        button["url"]
            .as_str()
            .unwrap()
            .starts_with("https://holdpoint.example/?agent=bankingAgent")
    );
}

/// Records what the timers asked for.
#[derive(Default)]
struct Recorder {
    expired: Mutex<Vec<HoldRef>>,
}

#[async_trait::async_trait]
impl HoldActions for Recorder {
    async fn expire(&self, hold: &HoldRef) -> holdpoint::Result<ExpireOutcome> {
        self.expired.lock().unwrap().push(hold.clone());
        Ok(ExpireOutcome::Denied)
    }
}

#[tokio::test]
async fn an_expiry_past_its_deadline_denies_through_hold_actions_once_and_sends_hold_expired() {
    let (receiver, addr) = Receiver::start(&[500]).await;
    let store = Arc::new(InMemoryStore::new());
    // The deadline passed while nothing ran (a server down across it).
    let past = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    let id = hold(&*store, "s-expire", json!({"expiresAt": past, "onExpire": "deny"})).await;
    let actions = Arc::new(Recorder::default());
    let config = NotifyConfig {
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap())
        .unwrap()
        .actions(actions.clone());
    let settled = || {
        futures::executor::block_on(states(&*store))
            .iter()
            .all(|(_, s)| *s == OutboxState::Delivered)
    };
    drive(&worker, settled).await;
    let expired = actions.expired.lock().unwrap().clone();
    assert_eq!(
        expired.len(),
        1,
        "the deny ran once although a delivery was retried: {expired:?}"
    );
    assert_eq!(expired[0].snapshot_id, id);
    assert_eq!(expired[0].reference.as_deref(), Some("r1"));
    assert_eq!(expired[0].tool, "transferMoney");
    let types: Vec<String> = receiver
        .on("/hook")
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(types.iter().filter(|t| *t == HOLD_EXPIRED).count() >= 1, "{types:?}");
    assert!(types.contains(&HOLD_CREATED.to_owned()), "{types:?}");
}

#[tokio::test]
async fn a_timer_whose_hold_was_answered_is_cancelled() {
    let (receiver, addr) = Receiver::start(&[]).await;
    let store = Arc::new(InMemoryStore::new());
    let past = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    let id = hold(&*store, "s-answered", json!({"remindAt": past})).await;
    store
        .claim_resume(holdpoint::session::ResumeClaim::new(id), vec![])
        .await
        .unwrap();
    let config = NotifyConfig {
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap()).unwrap();
    worker.run_once().await.unwrap();
    let states = states(&*store).await;
    assert!(
        states.contains(&("hold.reminded".into(), OutboxState::Cancelled)),
        "{states:?}"
    );
    assert_eq!(receiver.on("/hook").len(), 1, "only hold.created went out");
}

/// The type and `data` of each payload a receiver got.
fn payloads(got: &[Received]) -> Vec<(String, Value)> {
    got.iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (body["type"].as_str().unwrap().to_owned(), body["data"].clone())
        })
        .collect()
}

/// A rule's `remind_after` (stamped on the hold as the agent does) fires a
/// `hold.reminded` that reaches, signed, the channels that take it — one
/// that lists only `hold.reminded`, one that lists no events (all), and
/// email over a real SMTP server — addressed to the same approvers as the
/// first notice; a channel for other roles gets nothing.
#[tokio::test]
async fn a_rules_reminder_reaches_the_channels_that_take_it_with_the_same_approvers() {
    let (receiver, addr) = Receiver::start(&[]).await;
    let maildir = tempfile::tempdir().unwrap();
    let smtp = if python_has("aiosmtpd") {
        Some(smtp_server(maildir.path()).await)
    } else {
        None
    };
    let store = Arc::new(InMemoryStore::new());
    let timers = HoldTimers {
        remind_after: Some(Duration::from_millis(300)),
        ..HoldTimers::default()
    };
    let mut data = serde_json::Map::new();
    timers.stamp(&mut data, Utc::now());
    let id = hold(&*store, "s-remind", Value::Object(data)).await;
    let only = |path: &str, events: &[&str], roles: &[&str]| WebhookSpec {
        events: events.iter().map(|e| (*e).to_owned()).collect(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        ..webhook(addr, path)
    };
    let config = NotifyConfig {
        public_url: Some("https://holdpoint.example".into()),
        webhooks: vec![
            only("/reminders", &[HOLD_REMINDED], &[]),
            only("/all", &[], &[]),
            only("/hr", &[], &["hr"]),
        ],
        smtp: smtp.as_ref().map(|(_, spec)| spec.clone()),
        email: if smtp.is_some() {
            vec![EmailSpec {
                to: vec!["finance@example.com".into()],
                events: vec![HOLD_REMINDED.into()],
                roles: vec!["finance".into()],
            }]
        } else {
            vec![]
        },
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap()).unwrap();
    let settled = || {
        let states = futures::executor::block_on(states(&*store));
        states.len() == 2 && states.iter().all(|(_, s)| *s == OutboxState::Delivered)
    };
    drive(&worker, settled).await;

    let reminders = receiver.on("/reminders");
    assert_eq!(reminders.len(), 1, "{reminders:?}");
    let verifier = standardwebhooks::Webhook::new(&secret()).unwrap();
    verifier.verify(&reminders[0].body, &reminders[0].headers).unwrap();
    if python_has("standardwebhooks") {
        verify_with_python(&reminders[0], &secret()).unwrap();
    }
    let all = payloads(&receiver.on("/all"));
    let kinds: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, [HOLD_CREATED, HOLD_REMINDED], "the default takes reminders too");
    let (kind, reminder) = &payloads(&reminders)[0];
    assert_eq!(kind, HOLD_REMINDED);
    assert_eq!(reminder["approvers"], json!(["finance"]));
    assert_eq!(
        reminder["approvers"], all[0].1["approvers"],
        "the same approvers as the first notice"
    );
    assert_eq!(reminder["snapshotId"], Value::String(id));
    assert_eq!(reminder["ref"], "r1");
    assert_eq!(reminder["tool"], "transferMoney");
    assert!(receiver.on("/hr").is_empty(), "finance's hold is not hr's");

    let outbox = store.list_outbox(&OutboxQuery::default()).await.unwrap();
    let row = outbox.iter().find(|e| e.kind == HOLD_REMINDED).unwrap();
    let mut expected = vec!["timer", "webhook:0", "webhook:1"];
    if let Some((mut server, _)) = smtp {
        expected.push("email:0");
        let mails = mails_in(maildir.path());
        assert_eq!(mails.len(), 1, "only the reminder is mailed: {mails:?}");
        assert_eq!(mails[0]["to"], "finance@example.com");
        let subject = mails[0]["subject"].as_str().unwrap();
        assert!(
            subject.contains("Reminder") && subject.contains("transferMoney"),
            "{subject}"
        );
        server.kill().await.ok();
    }
    assert_eq!(row.done, expected);
}

/// Counts what the worker reports as unrouted.
#[derive(Default)]
struct Unrouted(Mutex<Vec<String>>);

impl DeliveryObserver for Unrouted {
    fn delivered(&self, _: &str, _: Duration) {}
    fn failed(&self, _: &str) {}
    fn dead(&self, _: &str) {}
    fn unrouted(&self, kind: &str) {
        self.0.lock().unwrap().push(kind.to_owned());
    }
}

/// An event no channel takes (here: the only channel takes `hold.decided`)
/// is sent nowhere and recorded so: `cancelled` with the reason, counted
/// as unrouted and not as delivered.
#[tokio::test]
async fn an_event_no_channel_takes_is_recorded_as_sent_nowhere_not_delivered() {
    let (receiver, addr) = Receiver::start(&[]).await;
    let store = Arc::new(InMemoryStore::new());
    hold(&*store, "s-nobody", json!({})).await;
    let config = NotifyConfig {
        webhooks: vec![WebhookSpec {
            events: vec![HOLD_DECIDED.into()],
            ..webhook(addr, "/hook")
        }],
        worker: fast(),
        ..Default::default()
    };
    let observer = Arc::new(Unrouted::default());
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap())
        .unwrap()
        .observer(observer.clone());
    let settled = || {
        futures::executor::block_on(states(&*store))
            .iter()
            .all(|(_, s)| *s != OutboxState::Pending)
    };
    drive(&worker, settled).await;
    let outbox = store.list_outbox(&OutboxQuery::default()).await.unwrap();
    assert_eq!(outbox.len(), 1);
    let row = &outbox[0];
    assert_eq!((row.kind.as_str(), row.state), (HOLD_CREATED, OutboxState::Cancelled));
    assert!(row.done.is_empty(), "{row:?}");
    let why = row.last_error.as_deref().unwrap();
    assert!(
        why.contains("no channel takes `hold.created`") && why.contains("finance"),
        "{why}"
    );
    assert!(receiver.got().is_empty());
    let m = worker.metrics().snapshot();
    assert_eq!((m.delivered, m.unrouted, m.cancelled), (0, 1, 0), "{m:?}");
    assert_eq!(*observer.0.lock().unwrap(), [HOLD_CREATED]);
}

#[tokio::test]
async fn a_hold_written_before_a_crash_is_delivered_after_the_restart() {
    let (receiver, addr) = Receiver::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outbox.db");
    {
        let store = holdpoint_store_sqlite::SqliteStore::open(&path).await.unwrap();
        hold(&store, "s-crash", json!({})).await;
        // A worker claimed it and died before delivering.
        let claimed = store
            .claim_outbox(Utc::now(), 10, Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        store.close().await;
    }
    let store = Arc::new(holdpoint_store_sqlite::SqliteStore::open(&path).await.unwrap());
    let config = NotifyConfig {
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let handle = Worker::new(store.clone(), Notifier::new(config).unwrap())
        .unwrap()
        .spawn();
    for _ in 0..400 {
        if !receiver.on("/hook").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let metrics = handle.metrics();
    handle.shutdown().await;
    assert_eq!(receiver.on("/hook").len(), 1);
    assert_eq!(metrics.snapshot().delivered, 1);
    let events = store.list_outbox(&OutboxQuery::default()).await.unwrap();
    assert_eq!((events[0].state, events[0].attempts), (OutboxState::Delivered, 2));
}

#[test]
fn bad_urls_and_secrets_are_start_up_errors_and_secrets_stay_hidden() {
    let spec = |url: &str, secret: &str| NotifyConfig {
        webhooks: vec![WebhookSpec {
            url: Secret::new(url),
            secret: Secret::new(secret),
            ..Default::default()
        }],
        ..Default::default()
    };
    let err = Notifier::new(spec("ftp://example.com/x", &secret())).unwrap_err();
    assert!(matches!(err, NotifyError::BadUrl { .. }), "{err}");
    assert!(!err.to_string().contains("example.com"), "{err}");
    let err = Notifier::new(spec("http://127.0.0.1:1/hook", "whsec_not*base64!")).unwrap_err();
    assert!(matches!(err, NotifyError::BadSecret { .. }), "{err}");
    assert!(!err.to_string().contains("not*base64"), "{err}");
    let err = Notifier::new(spec("http://127.0.0.1:1/hook", "whsec_")).unwrap_err();
    assert!(matches!(err, NotifyError::BadSecret { .. }), "{err}");
    let mut unknown = spec("http://127.0.0.1:1/hook", &secret());
    unknown.webhooks[0].events = vec!["hold.exploded".into()];
    assert!(matches!(
        Notifier::new(unknown).unwrap_err(),
        NotifyError::UnknownEvent { .. }
    ));
    let no_smtp = NotifyConfig {
        email: vec![EmailSpec {
            to: vec!["finance@example.com".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(matches!(Notifier::new(no_smtp).unwrap_err(), NotifyError::Invalid(_)));

    let good = spec("http://127.0.0.1:1/hook?token=sekrit", &secret());
    let shown = format!("{good:?} {:?}", Notifier::new(good.clone()).unwrap());
    assert!(!shown.contains("sekrit"), "{shown}");
    assert!(!shown.contains(&secret()[6..]), "{shown}");
}

/// Starts an `aiosmtpd` server on loopback that writes what it gets into
/// the maildir `dir/mail`, and waits (bounded) until it listens; returns it
/// (killed on drop) and the relay settings that reach it.
async fn smtp_server(dir: &Path) -> (tokio::process::Child, SmtpSpec) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = tokio::process::Command::new("python3")
        .args([
            "-m",
            "aiosmtpd",
            "-n",
            "-l",
            &format!("127.0.0.1:{port}"),
            "-c",
            "aiosmtpd.handlers.Mailbox",
        ])
        .arg(dir.join("mail"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Python starts slowly on a busy machine.
    let mut up = false;
    for _ in 0..2400 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "aiosmtpd did not start");
    let smtp = SmtpSpec {
        host: "127.0.0.1".into(),
        port: Some(port),
        from: "holdpoint@example.com".into(),
        tls: SmtpTls::None,
        username: None,
        password: None,
    };
    (server, smtp)
}

/// The mails [`smtp_server`] wrote into `dir/mail`: headers and decoded
/// parts, as `mail_parts.py` prints them.
fn mails_in(dir: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mail_parts.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(dir.join("mail"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn email_goes_through_a_real_smtp_server_with_text_and_html_parts() {
    if !python_has("aiosmtpd") {
        return;
    }
    let maildir = tempfile::tempdir().unwrap();
    let (mut server, smtp) = smtp_server(maildir.path()).await;
    let store = Arc::new(InMemoryStore::new());
    hold(&*store, "s-mail", json!({})).await;
    let config = NotifyConfig {
        public_url: Some("https://holdpoint.example".into()),
        smtp: Some(smtp),
        email: vec![EmailSpec {
            to: vec!["finance@example.com".into()],
            events: vec![HOLD_CREATED.into()],
            roles: vec![],
        }],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(store.clone(), Notifier::new(config).unwrap()).unwrap();
    let settled = || {
        futures::executor::block_on(states(&*store))
            .iter()
            .all(|(_, s)| *s == OutboxState::Delivered)
    };
    drive(&worker, settled).await;
    let mails = mails_in(maildir.path());
    assert_eq!(mails.len(), 1, "{mails:?}");
    let mail = &mails[0];
    assert_eq!(mail["type"], "multipart/alternative");
    assert_eq!(mail["to"], "finance@example.com");
    assert!(mail["subject"].as_str().unwrap().contains("transferMoney"));
    let parts = mail["parts"].as_array().unwrap();
    let part = |t: &str| {
        parts
            .iter()
            .find(|p| p["type"] == t)
            .and_then(|p| p["content"].as_str())
            .unwrap_or_else(|| panic!("no {t} part: {parts:?}"))
            .to_owned()
    };
    let (text, html) = (part("text/plain"), part("text/html"));
    for body in [&text, &html] {
        assert!(body.contains("amount: 50000"), "{body}");
        assert!(body.contains("https://holdpoint.example/?agent=bankingAgent"), "{body}");
        assert!(body.contains("finance"), "{body}");
    }
    assert!(html.contains("<a href="), "{html}");
    server.kill().await.ok();
}

/// An agent answers its own expired hold when the expiry timer fires with
/// `onExpire = "deny"`: the call never runs, the model is told the approval
/// expired, the audit records `expired`, and `hold.expired` and
/// `hold.decided` go out.
#[tokio::test]
async fn an_agent_denies_its_expired_hold_when_the_timer_fires() {
    use holdpoint::agent::{Agent, AgentInit, AgentInput};
    use holdpoint::session::{AuditDecision, AuditQuery};
    use holdpoint::tool::{DynamicTool, ToolContext};
    use holdpoint::{ScriptedModel, ScriptedTurn};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (receiver, addr) = Receiver::start(&[]).await;
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let transfer = DynamicTool::new(
        "transferMoney",
        "moves money",
        json!({"type": "object"}),
        move |ctx: ToolContext, _input: Value| {
            let counter = Arc::clone(&counter);
            async move {
                if ctx.is_resumed() {
                    counter.fetch_add(1, Ordering::SeqCst);
                    return Ok(json!({"done": true}));
                }
                // Held for finance; the deadline passed while nothing ran.
                let past = (Utc::now() - chrono::Duration::seconds(2)).to_rfc3339();
                Err(ctx.interrupt(json!({"approvers": ["finance"], "expiresAt": past, "onExpire": "deny"})))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/expiry", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text(format!("noted: {}", last.content.len())));
        }
        Some(ScriptedTurn::tool_call("transferMoney", json!({"amount": 50000})))
    });
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model))
        .tools([transfer])
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let held = agent.run(AgentInput::text("pay ACME"), AgentInit::new()).await.unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let snapshot_id = held.snapshot_id.clone().unwrap();

    let config = NotifyConfig {
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap())
        .unwrap()
        .actions(Arc::new(agent.clone()));
    let expired_sent = || {
        receiver
            .on("/hook")
            .iter()
            .any(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["type"] == HOLD_EXPIRED)
    };
    drive(&worker, expired_sent).await;
    for _ in 0..3 {
        worker.run_once().await.unwrap();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "an expired hold's call never runs");
    let trail = agent.decisions().audit(AuditQuery::default()).await.unwrap();
    assert_eq!(trail.len(), 1, "{trail:?}");
    assert_eq!(trail[0].decision, AuditDecision::Expired);
    assert_eq!(trail[0].snapshot_id, snapshot_id);
    assert!(!store.get_snapshot(&snapshot_id).await.unwrap().unwrap().is_waiting());
    let latest = store.get_latest_snapshot(&held.session_id).await.unwrap().unwrap();
    let told = serde_json::to_string(&latest.state.unwrap().messages).unwrap();
    assert!(told.contains("approval expired"), "{told}");
    let decided: Vec<Value> = receiver
        .on("/hook")
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| b["type"] == "hold.decided")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["decisions"][0]["decision"], "expire");
}

#[tokio::test]
async fn an_escalation_lets_its_roles_answer_the_hold_from_then_on() {
    use holdpoint::agent::{Agent, AgentInit, AgentInput, Answer, Answered};
    use holdpoint::approval::{Policy, ROLES, RuleSpec};
    use holdpoint::session::outbox::HOLD_ESCALATED;
    use holdpoint::tool::DynamicTool;
    use holdpoint::{ScriptedModel, ScriptedTurn, Status};

    let (receiver, addr) = Receiver::start(&[]).await;
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let transfer = DynamicTool::new(
        "transferMoney",
        "moves money",
        json!({"type": "object"}),
        |_ctx: holdpoint::tool::ToolContext, _input: Value| async move { Ok(json!({"done": true})) },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/escalation", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            return Some(ScriptedTurn::text("paid"));
        }
        Some(ScriptedTurn::tool_call("transferMoney", json!({"amount": 50000})))
    });
    let rule = RuleSpec {
        name: Some("big transfers".into()),
        tool: Some("transferMoney".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        // Escalated at once: the timer is due as soon as the hold is
        // written.
        timers: holdpoint::session::HoldTimers {
            escalate_after: Some(Duration::ZERO),
            escalate_to: vec!["cfo".into()],
            ..Default::default()
        },
        ..RuleSpec::default()
    };
    let policy = Policy::new(vec![rule]).unwrap();
    let agent = Agent::builder("bankingAgent")
        .model(Arc::new(model))
        .tools([transfer])
        .store(Arc::clone(&store))
        .approval_policy(policy)
        .build()
        .unwrap();
    let held = agent
        .run_with(
            AgentInput::text("pay ACME"),
            holdpoint::agent::RunOptions::new(AgentInit::new()).principal("alice".to_owned()),
        )
        .await
        .unwrap();
    assert_eq!(held.finish_reason, FinishReason::Interrupted);
    let snapshot_id = held.snapshot_id.clone().unwrap();
    let cfo = || {
        let mut context = serde_json::Map::new();
        context.insert(holdpoint::agent::PRINCIPAL.into(), json!("carol"));
        context.insert(ROLES.into(), json!(["cfo"]));
        context
    };
    let approve = || Answer::approve(snapshot_id.clone());

    // Before the escalation fires, the CFO does not see the hold.
    let before = agent
        .decisions()
        .answer(approve(), cfo())
        .await
        .expect_err("not yet an approver");
    assert_eq!(before.status(), Status::NotFound, "{before}");

    let config = NotifyConfig {
        webhooks: vec![webhook(addr, "/hook")],
        worker: fast(),
        ..Default::default()
    };
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap())
        .unwrap()
        .actions(Arc::new(agent.clone()));
    let escalated_sent = || {
        receiver
            .on("/hook")
            .iter()
            .any(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["type"] == HOLD_ESCALATED)
    };
    drive(&worker, escalated_sent).await;
    let sent: Vec<Value> = receiver
        .on("/hook")
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| b["type"] == HOLD_ESCALATED)
        .collect();
    assert_eq!(sent[0]["data"]["approvers"], json!(["finance", "cfo"]));

    // The snapshot itself records the added role: any process reading the
    // store lets the CFO list, read and answer the hold.
    let row = store.get_snapshot(&snapshot_id).await.unwrap().unwrap();
    let last = row.state.as_ref().unwrap().messages.last().unwrap();
    let rule = holdpoint::approval::HoldRule::on(last.interrupts().next().unwrap()).unwrap();
    assert_eq!(rule.approvers, ["finance", "cfo"]);
    match agent.decisions().answer(approve(), cfo()).await.unwrap() {
        Answered::Resumed(out) => assert_eq!(out.finish_reason, FinishReason::Stop),
        other => panic!("{other:?}"),
    }
}
