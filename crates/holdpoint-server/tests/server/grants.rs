//! Standing grants over HTTP (docs/reference.md §10.9): an approval's
//! `grant` creates one, a later call runs without a hold, `GET /grants`
//! lists what the caller may manage, `DELETE /grants/{id}` revokes it at
//! once, and callers who may not answer the holds can neither create,
//! list nor revoke (403/404, JSON bodies).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::http::request::Parts;
use holdpoint::agent::Agent;
use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::SessionStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_server::Server;
use holdpoint_server::auth::{AuthError, ContextProvider, Identity};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, memory, read, user};

/// `x-api-key: NAME` is NAME; olga and pete are in finance.
struct Keys;

#[async_trait]
impl ContextProvider for Keys {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let Some(name) = request.headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let identity = Identity::new(name);
        Ok(Some(match name {
            "olga" | "pete" => identity.with_roles(["finance"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

/// `payBill` (the user's message is the amount) is held for finance,
/// never its owner.
pub fn payer(store: Arc<dyn SessionStore>, paid: &Arc<AtomicUsize>) -> Agent {
    let paid = Arc::clone(paid);
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object"}),
        move |_ctx: ToolContext, input: Value| {
            let paid = Arc::clone(&paid);
            async move {
                paid.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"paid": input["amount"]}))
            }
        },
    )
    .into_tool();
    let model = ScriptedModel::from_fn("scripted/payer", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::Role::Tool {
            return Some(ScriptedTurn::text("done"));
        }
        let amount: u64 = last.text().trim().parse().ok()?;
        Some(ScriptedTurn::tool_call("payBill", json!({"amount": amount})))
    });
    let policy = Policy::new([RuleSpec {
        name: Some("bills".into()),
        tool: Some("payBill".into()),
        approvers: vec!["finance".into()],
        quorum: 1,
        self_approval: false,
        ..Default::default()
    }])
    .unwrap();
    Agent::builder("payer")
        .model(Arc::new(model))
        .tool(pay)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

async fn start(paid: &Arc<AtomicUsize>) -> TestServer {
    let server = Server::builder()
        .agent(payer(memory(), paid))
        .provider(Arc::new(Keys))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    TestServer::start(server).await
}

async fn pay(s: &TestServer, who: &str, session: Option<&str>, amount: u64) -> Value {
    let mut body = json!({"data": user(&amount.to_string())});
    if let Some(id) = session {
        body["init"] = json!({"sessionId": id});
    }
    let (code, body) = s.post("/agents/payer", body, Some(who)).await;
    assert_eq!(code, 200, "{body:#}");
    body["result"].clone()
}

async fn delete(s: &TestServer, path: &str, who: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .delete(s.url(path))
        .header("x-api-key", who)
        .send()
        .await
        .unwrap();
    read(response).await
}

#[tokio::test]
async fn an_approval_with_a_grant_lets_later_calls_run_and_revoking_it_stops_them() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let held = pay(&s, "alice", None, 50).await;
    assert_eq!(held["finishReason"], "interrupted", "{held:#}");
    let session = held["sessionId"].as_str().unwrap().to_owned();
    let answer =
        |grant: Value| json!({"data": {"snapshotId": held["snapshotId"], "decision": "approve", "grant": grant}});

    // Bad grants are 400 with a JSON body, and change nothing.
    let bad = s
        .post(
            "/agents/payer/answer",
            answer(json!({"scope": "forever"})),
            Some("olga"),
        )
        .await;
    assert_eq!(bad.0, 400, "{:#}", bad.1);
    assert!(bad.1["error"]["message"].is_string(), "{:#}", bad.1);
    let bad = s
        .post(
            "/agents/payer/answer",
            answer(json!({"scope": "session", "when": "input.amount <"})),
            Some("olga"),
        )
        .await;
    assert_error(&bad, 400, "INVALID_ARGUMENT", "grant condition");
    // Whoever may not answer the hold may not grant from it.
    let mallory = s
        .post(
            "/agents/payer/answer",
            answer(json!({"scope": "tool"})),
            Some("mallory"),
        )
        .await;
    assert_eq!(mallory.0, 404, "{:#}", mallory.1);
    let owner = s
        .post("/agents/payer/answer", answer(json!({"scope": "tool"})), Some("alice"))
        .await;
    assert_error(&owner, 403, "PERMISSION_DENIED", "bills");
    assert_eq!(paid.load(Ordering::SeqCst), 0);

    let (code, done) = s
        .post(
            "/agents/payer/answer",
            answer(json!({"scope": "session", "ttl": "1h", "uses": 5})),
            Some("olga"),
        )
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], true);
    let grant = done["result"]["grant"].clone();
    assert_eq!(
        (grant["grantedBy"].as_str(), grant["usesLeft"].as_u64()),
        (Some("olga"), Some(5))
    );
    let id = grant["id"].as_str().unwrap().to_owned();

    let next = pay(&s, "alice", Some(&session), 60).await;
    assert_eq!(next["finishReason"], "stop", "the grant stands in: {next:#}");
    assert_eq!(paid.load(Ordering::SeqCst), 2);
    let (_, audit) = s.get(&format!("/audit?sessionId={session}"), Some("olga")).await;
    let named = audit["result"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["grant"]["id"] == json!(id))
        .count();
    assert_eq!(named, 1, "{audit:#}");

    // Listed for finance, not for another customer.
    let (code, listed) = s.get("/grants", Some("pete")).await;
    assert_eq!(code, 200, "{listed:#}");
    assert_eq!(listed["result"][0]["id"], json!(id));
    assert_eq!(listed["result"][0]["usesLeft"], 4);
    let (_, theirs) = s.get("/grants", Some("bob")).await;
    assert_eq!(theirs["result"], json!([]));
    let bad = s.get("/grants?scope=all", Some("pete")).await;
    assert_eq!(bad.0, 400, "{:#}", bad.1);

    // Only who may manage it revokes it.
    assert_error(
        &delete(&s, &format!("/grants/{id}"), "bob").await,
        404,
        "NOT_FOUND",
        "not found",
    );
    assert_error(
        &delete(&s, "/grants/no-such-grant", "pete").await,
        404,
        "NOT_FOUND",
        "not found",
    );
    let (code, revoked) = delete(&s, &format!("/grants/{id}"), "pete").await;
    assert_eq!(code, 200, "{revoked:#}");
    assert_eq!(revoked["result"]["revokedBy"], "pete");
    let again = pay(&s, "alice", Some(&session), 70).await;
    assert_eq!(again["finishReason"], "interrupted", "held again at once");
    assert_eq!(paid.load(Ordering::SeqCst), 2);
    let (_, active) = s.get("/grants?active=true", Some("pete")).await;
    assert_eq!(active["result"], json!([]));
}
