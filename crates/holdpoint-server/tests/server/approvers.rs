//! Approvers over HTTP (docs/reference.md §10.7): listing, reading and
//! answering holds by role, 403 naming the rule, 404 for what the caller
//! may not see, quorum across approvers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::http::request::Parts;
use holdpoint::agent::Agent;
use holdpoint::approval::{ApprovalReply, Policy, RuleSpec};
use holdpoint::session::SessionStore;
use holdpoint::tool::{ResumableTool, ToolContext};
use holdpoint_server::Server;
use holdpoint_server::auth::{AuthError, ContextProvider, Identity};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::bank::{Transfer, model};
use crate::support::{TestServer, assert_error, dump, memory, user};

/// `x-api-key: NAME` is NAME; olga, pete and quinn are in finance.
struct Keys;

#[async_trait]
impl ContextProvider for Keys {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let Some(name) = request.headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
            return Ok(None);
        };
        let identity = Identity::new(name);
        Ok(Some(match name {
            "olga" | "pete" | "quinn" => identity.with_roles(["finance"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
struct Reply {
    approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feedback: Option<String>,
}

impl ApprovalReply for Reply {
    fn approve(feedback: Option<String>) -> Self {
        Reply {
            approved: true,
            feedback,
        }
    }
    fn deny(feedback: Option<String>) -> Self {
        Reply {
            approved: false,
            feedback,
        }
    }
}

fn agent(store: Arc<dyn SessionStore>, moved: &Arc<AtomicUsize>) -> Agent {
    let moved = Arc::clone(moved);
    let transfer = ResumableTool::define(
        "transferMoney",
        "moves money after approval",
        move |ctx: ToolContext, t: Transfer, reply: Option<Reply>| {
            let moved = Arc::clone(&moved);
            async move {
                match reply {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${} to {}", t.amount, t.to_account)})))
                    }
                    Some(r) if r.approved => {
                        moved.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"success": true, "transactionId": "txn-1"}))
                    }
                    Some(r) => Err(ctx.fail(format!("declined: {}", r.feedback.unwrap_or_default()))),
                }
            }
        },
    )
    .unwrap()
    .approval_reply()
    .unwrap();
    let policy = Policy::new([RuleSpec {
        name: Some("large transfers".into()),
        agent: Some("bankingAgent".into()),
        tool: Some("transferMoney".into()),
        when: Some("input.amount > 10000".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
    }])
    .unwrap();
    Agent::builder("bankingAgent")
        .model(Arc::new(model()))
        .tool(transfer)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

async fn start(moved: &Arc<AtomicUsize>) -> (TestServer, Arc<holdpoint::session::InMemoryStore>) {
    let store = memory();
    let server = Server::builder()
        .agent(agent(store.clone(), moved))
        .provider(Arc::new(Keys))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    (TestServer::start(server).await, store)
}

async fn transfer(s: &TestServer, who: &str, text: &str) -> Value {
    let (code, body) = s
        .post("/agents/bankingAgent", json!({"data": user(text)}), Some(who))
        .await;
    assert_eq!(code, 200, "{body:#}");
    body["result"].clone()
}

fn answer(snapshot: &Value, decision: &str) -> Value {
    json!({"data": {"snapshotId": snapshot, "decision": decision}})
}

#[tokio::test]
async fn approvers_list_read_and_answer_by_role_and_a_quorum_of_two_runs_the_transfer_once() {
    let moved = Arc::new(AtomicUsize::new(0));
    let (s, store) = start(&moved).await;
    let big = transfer(&s, "alice", "Transfer $50000 to x").await;
    let bobs_small = transfer(&s, "bob", "Transfer $500 to y").await;
    let id = big["snapshotId"].clone();

    // The approver lists the customer's big transfer, not the small one.
    let (code, listed) = s.get("/agents/bankingAgent/pending", Some("olga")).await;
    assert_eq!(code, 200);
    let items = listed["result"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed:#}");
    assert_eq!(items[0]["snapshotId"], id);
    assert_eq!(items[0]["rule"]["approvers"], json!(["finance"]));
    assert_eq!(items[0]["rule"]["quorum"], 2);
    // …and reads the held session.
    let read = json!({"data": {"snapshotId": id}});
    let (code, snap) = s
        .post("/agents/bankingAgent/getSnapshot", read.clone(), Some("olga"))
        .await;
    assert_eq!(code, 200, "{snap:#}");
    // Another customer sees neither.
    let (_, listed) = s.get("/agents/bankingAgent/pending", Some("bob")).await;
    let items = listed["result"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["snapshotId"], bobs_small["snapshotId"]);
    let got = s.post("/agents/bankingAgent/getSnapshot", read, Some("bob")).await;
    assert_error(&got, 404, "NOT_FOUND", "not found");
    let got = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("bob"))
        .await;
    assert_error(&got, 404, "NOT_FOUND", "not found");
    // An approver cannot touch sessions its roles do not cover.
    let small = json!({"data": {"snapshotId": bobs_small["snapshotId"]}});
    let got = s.post("/agents/bankingAgent/getSnapshot", small, Some("olga")).await;
    assert_error(&got, 404, "NOT_FOUND", "not found");

    // The customer's own approval is refused, naming the rule; nothing changes.
    let before = dump(store.as_ref()).await;
    let got = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("alice"))
        .await;
    assert_error(&got, 403, "PERMISSION_DENIED", "large transfers");
    assert_eq!(dump(store.as_ref()).await, before);

    let (code, first) = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("olga"))
        .await;
    assert_eq!(code, 200, "{first:#}");
    assert_eq!(first["result"]["decided"], false);
    assert_eq!(first["result"]["quorum"], 2);
    assert_eq!(first["result"]["approvals"][0]["actor"], "olga");
    let (_, again) = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("olga"))
        .await;
    assert_eq!(again["result"]["counted"], false);
    assert_eq!(again["result"]["approvals"].as_array().unwrap().len(), 1);
    let (_, listed) = s.get("/agents/bankingAgent/pending", Some("pete")).await;
    assert_eq!(listed["result"][0]["approvals"][0]["actor"], "olga");
    assert_eq!(moved.load(Ordering::SeqCst), 0);

    let (code, done) = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("pete"))
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], true);
    assert_eq!(done["result"]["output"]["finishReason"], "stop");
    assert_eq!(moved.load(Ordering::SeqCst), 1);
    let got = s
        .post("/agents/bankingAgent/answer", answer(&id, "approve"), Some("quinn"))
        .await;
    assert_eq!(got.0.as_u16(), 409, "{:#}", got.1);
    assert_eq!(moved.load(Ordering::SeqCst), 1);

    // The audit names both actors.
    let path = format!(
        "/agents/bankingAgent/audit?sessionId={}",
        big["sessionId"].as_str().unwrap()
    );
    let (_, audit) = s.get(&path, Some("alice")).await;
    let mut actors: Vec<&str> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["decision"], "approve");
            r["actor"].as_str().unwrap()
        })
        .collect();
    actors.sort_unstable();
    assert_eq!(actors, ["olga", "pete"]);
}

#[tokio::test]
async fn a_denial_by_an_approver_is_recorded_deny_and_the_transfer_is_not_made() {
    let moved = Arc::new(AtomicUsize::new(0));
    let (s, _store) = start(&moved).await;
    let big = transfer(&s, "alice", "Transfer $50000 to x").await;
    let body = json!({"data": {"snapshotId": big["snapshotId"], "decision": "deny", "reason": "fraud"}});
    let (code, done) = s.post("/agents/bankingAgent/answer", body, Some("olga")).await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], true);
    assert_eq!(moved.load(Ordering::SeqCst), 0);
    let path = format!(
        "/agents/bankingAgent/audit?sessionId={}",
        big["sessionId"].as_str().unwrap()
    );
    let (_, audit) = s.get(&path, Some("alice")).await;
    assert_eq!(audit["result"][0]["decision"], "deny");
    assert_eq!(audit["result"][0]["actor"], "olga");
    assert_eq!(audit["result"][0]["reason"], "fraud");

    // A small transfer follows the default: its owner answers it.
    let small = transfer(&s, "alice", "Transfer $500 to x").await;
    let (code, done) = s
        .post(
            "/agents/bankingAgent/answer",
            answer(&small["snapshotId"], "approve"),
            Some("alice"),
        )
        .await;
    assert_eq!(code, 200, "{done:#}");
    assert_eq!(done["result"]["decided"], true);
    assert_eq!(moved.load(Ordering::SeqCst), 1);
}
