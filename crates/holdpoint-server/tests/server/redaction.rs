//! Redaction over HTTP (docs/reference.md §22.1): a secret planted in a
//! held call's input shows in none of the places people and systems read
//! a hold — the inbox, the agent's pending list, the transcript, the
//! audit, the webhook, the notification listing, AG-UI and A2A
//! interrupts, the server's logs — while the approved tool runs with it
//! whole. The tool's preview is the hold's headline everywhere.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdpoint::agent::Agent;
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::review::{HoldView, MASK, Preview};
use holdpoint::session::{InMemoryStore, SessionStore};
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_notify::{Notifier, NotifyConfig, RetryPolicy, Secret, WebhookSpec, Worker, WorkerOptions};
use holdpoint_server::auth::ApiKeys;
use holdpoint_server::{OPERATOR_ROLE, Server};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::receivers::{Logs, Receiver};
use crate::support::{TestServer, user};

const CARD: &str = "4111-PLANTED-SECRET-0042";
const OWNER_KEY: &str = "k-redaction-owner-0123456789";
const FINANCE_KEY: &str = "k-redaction-finance-0123456";
const OPERATOR_KEY: &str = "k-redaction-operator-012345";

/// `payVendor` masks `card.number` and previews the payment; the model
/// pays with a card the user never typed.
fn shop(store: Arc<dyn SessionStore>, seen: Arc<Mutex<Vec<Value>>>) -> Agent {
    let pay = DynamicTool::new(
        "payVendor",
        "Pays a vendor",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            seen.lock().unwrap().push(input.clone());
            async move { Ok(json!({"paid": input["amount"]})) }
        },
    )
    .hold_view(HoldView::new().redact(["card.number"]).unwrap().preview(|input| {
        Ok(Preview::new(format!(
            "Pay ${:.2} to {}",
            input["amount"].as_f64().unwrap_or(0.0),
            input["vendor"].as_str().unwrap_or("?")
        ))
        .field("Card", input["card"]["number"].as_str().unwrap_or("?")))
    }))
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/shop", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("paid"));
        }
        Some(ScriptedTurn::tool_call(
            "payVendor",
            json!({"vendor": "acme", "amount": 40, "card": {"number": CARD, "holder": "alice"}}),
        ))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("vendors".into()),
        tool: Some("payVendor".into()),
        approvers: vec!["finance".into()],
        self_approval: false,
        ..RuleSpec::default()
    }])
    .unwrap();
    Agent::builder("shop")
        .model(Arc::new(model))
        .tool(pay)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

#[track_caller]
fn clean(what: &str, text: &str) {
    assert!(!text.contains(CARD), "{what} shows the secret: {text}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_planted_secret_shows_nowhere_a_hold_is_read() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    let _logging = tracing::subscriber::set_default(subscriber);

    let (hook, hook_addr) = Receiver::start(Vec::new()).await;
    let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = Server::builder()
        .agent(shop(Arc::clone(&store), Arc::clone(&seen)))
        .api_keys(
            ApiKeys::new()
                .key(OWNER_KEY, "alice")
                .key_with_roles(FINANCE_KEY, "fiona", ["finance"])
                .key_with_roles(OPERATOR_KEY, "oscar", [OPERATOR_ROLE]),
        )
        .notifications(Arc::clone(&store))
        .build()
        .unwrap();
    let http = TestServer::start(server).await;
    let config = NotifyConfig {
        webhooks: vec![WebhookSpec {
            url: Secret::new(format!("http://{hook_addr}/hook")),
            secret: Secret::new("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMy".to_owned()),
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
    let worker = Worker::new(Arc::clone(&store), Notifier::new(config).unwrap()).unwrap();

    // Alice asks; the call is held for finance.
    let (code, held) = http
        .post("/agents/shop", json!({"data": user("pay acme")}), Some(OWNER_KEY))
        .await;
    assert_eq!(code, StatusCode::OK, "{held:#}");
    assert_eq!(held["result"]["finishReason"], "interrupted", "{held:#}");
    // Even the requester's own output shows the held call masked.
    clean("the run's output", &held.to_string());
    let snapshot = held["result"]["snapshotId"].as_str().unwrap().to_owned();

    // The inbox: the preview is the headline, the card is masked.
    let (code, inbox) = http.get("/inbox", Some(FINANCE_KEY)).await;
    assert_eq!(code, StatusCode::OK, "{inbox:#}");
    clean("the inbox", &inbox.to_string());
    let item = &inbox["result"]["items"][0];
    assert_eq!(item["summary"], "Pay $40.00 to acme", "{item:#}");
    assert_eq!(
        item["preview"]["fields"][0]["value"], MASK,
        "the preview saw the masked input"
    );
    assert_eq!(item["input"]["card"]["number"], MASK, "{item:#}");
    assert_eq!(item["input"]["card"]["holder"], "alice", "only the path is masked");
    // Searching for the secret finds nothing: it is not an oracle.
    let (_, searched) = http.get(&format!("/inbox?q={}", &CARD[5..20]), Some(FINANCE_KEY)).await;
    assert_eq!(searched["result"]["items"], json!([]), "{searched:#}");

    // The agent's pending list and the transcript the inbox opens.
    let (_, pending) = http.get("/agents/shop/pending", Some(FINANCE_KEY)).await;
    clean("the pending list", &pending.to_string());
    assert!(pending.to_string().contains(MASK), "{pending:#}");
    let (code, transcript) = http
        .post(
            "/agents/shop/getSnapshot",
            json!({"data": {"snapshotId": snapshot}}),
            Some(FINANCE_KEY),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{transcript:#}");
    clean("the transcript", &transcript.to_string());

    // The webhook and the operator's notification listing.
    worker.run_once().await.unwrap();
    let delivered = hook.bodies.lock().unwrap().clone();
    assert!(!delivered.is_empty(), "the hold was notified");
    let webhook = serde_json::to_string(&delivered).unwrap();
    clean("the webhook", &webhook);
    assert!(webhook.contains("Pay $40.00 to acme"), "{webhook}");
    let (_, listed) = http.get("/notifications", Some(OPERATOR_KEY)).await;
    clean("the notification listing", &listed.to_string());

    // AG-UI and A2A runs of the same agent by its owner: their interrupts.
    let agui = http
        .client
        .post(http.url("/agents/shop/agui"))
        .header("x-api-key", OWNER_KEY)
        .header("accept", "text/event-stream")
        .json(&json!({
            "threadId": "t-redact", "runId": "r-1", "state": {}, "tools": [], "context": [],
            "messages": [{"id": "u1", "role": "user", "content": "pay acme"}],
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(agui.contains("RUN_FINISHED") && agui.contains("interrupt"), "{agui}");
    assert!(agui.contains("Pay $40.00 to acme"), "the interrupt's message: {agui}");
    clean("the AG-UI stream", &agui);
    let (code, a2a) = {
        let r = http
            .client
            .post(http.url("/agents/shop/a2a"))
            .header("x-api-key", OWNER_KEY)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "pay acme"}]},
            }}))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    };
    assert_eq!(code, StatusCode::OK, "{a2a}");
    assert!(a2a.contains("Pay $40.00 to acme"), "{a2a}");
    clean("the A2A task", &a2a);

    // Finance approves from the inbox: the tool gets the whole card.
    let (code, done) = http
        .post(
            "/agents/shop/answer",
            json!({"data": {"snapshotId": snapshot, "decision": "approve"}}),
            Some(FINANCE_KEY),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{done:#}");
    clean("the answer's output", &done.to_string());
    assert_eq!(seen.lock().unwrap()[0]["card"]["number"], CARD);

    // The transcript after the call ran: the answered call stays masked.
    let session = held["result"]["sessionId"].as_str().unwrap();
    let (code, after) = http
        .post(
            "/agents/shop/getSnapshot",
            json!({"data": {"sessionId": session}}),
            Some(OWNER_KEY),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{after:#}");
    assert!(after.to_string().contains("resolvedInterrupt"), "{after:#}");
    clean("the transcript after the answer", &after.to_string());

    // The audit (what the page exports) and the decision's webhook.
    let (_, audit) = http.get("/audit", Some(FINANCE_KEY)).await;
    assert!(audit.to_string().contains("approve"), "{audit:#}");
    clean("the audit", &audit.to_string());
    worker.run_once().await.unwrap();
    clean(
        "the webhooks",
        &serde_json::to_string(&*hook.bodies.lock().unwrap()).unwrap(),
    );

    // And nothing of it reached the logs.
    let logged = logs.text();
    assert!(!logged.is_empty(), "the logs were captured");
    clean("the logs", &logged);
}
