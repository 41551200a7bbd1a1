//! Issue 34, round 2, over HTTP: the inbox answers a refresh that changed
//! nothing with 304 and sends `interrupt`, `rule` and `reply` once per
//! item (items 9); a rule's `confirm`, `deny_reasons` and
//! `reason_required` from TOML reach the hold and a bare denial is refused
//! (items 11, 14); the requester withdraws their own hold under a rule
//! without self-approval, audited `withdraw` (item 14); the audit lists the
//! input each decision was about (item 12).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::http::request::Parts;
use holdpoint::agent::Agent;
use holdpoint::approval::Policy;
use holdpoint::session::SessionStore;
use holdpoint::tool::{DynamicTool, ToolContext};
use holdpoint::{ScriptedModel, ScriptedTurn};
use holdpoint_deploy::Config;
use holdpoint_server::Server;
use holdpoint_server::auth::{AuthError, ContextProvider, Identity};
use serde_json::{Value, json};

use crate::support::{TestServer, assert_error, memory, user};

/// `x-api-key: NAME` is NAME; olga and pete are in finance.
pub struct Keys;

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

/// The rules of the tests, from TOML: bills (no self-approval), with a
/// confirmation, preset reasons and a required reason on the large ones.
pub const RULES: &str = r#"
[auth]
roles = ["finance"]

[[approval.rules]]
name = "large bills"
tool = "payBill"
when = "input.amount > 10000"
approvers = ["finance"]
self_approval = false
confirm = true
deny_reasons = ["Looks like fraud", "Duplicate payment"]
reason_required = true

[[approval.rules]]
name = "bills"
tool = "payBill"
approvers = ["finance"]
self_approval = false
"#;

pub fn policy() -> Policy {
    Config::parse(RULES, "holdpoint.toml").unwrap().approval_policy()
}

/// `payBill` (the user's message is the amount), held by `policy`.
pub fn payer(store: Arc<dyn SessionStore>, paid: &Arc<AtomicUsize>, policy: Policy) -> Agent {
    let paid = Arc::clone(paid);
    let pay = DynamicTool::new(
        "payBill",
        "pays a bill",
        json!({"type": "object", "properties": {"amount": {"type": "number"}}}),
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
    Agent::builder("payer")
        .model(Arc::new(model))
        .tool(pay)
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

pub async fn start(paid: &Arc<AtomicUsize>) -> TestServer {
    let server = Server::builder()
        .agent(payer(memory(), paid, policy()))
        .provider(Arc::new(Keys))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    TestServer::start(server).await
}

pub async fn pay(s: &TestServer, who: &str, amount: u64) -> Value {
    let (code, body) = s
        .post("/agents/payer", json!({"data": user(&amount.to_string())}), Some(who))
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    body["result"].clone()
}

/// GET `path` as `who` with `If-None-Match: etag`: status, ETag, body bytes.
async fn get_raw(s: &TestServer, path: &str, who: &str, etag: Option<&str>) -> (u16, Option<String>, Vec<u8>) {
    let mut req = reqwest::Client::new().get(s.url(path)).header("x-api-key", who);
    if let Some(tag) = etag {
        req = req.header("if-none-match", tag);
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    let tag = response.headers().get("etag").map(|v| v.to_str().unwrap().to_owned());
    (status, tag, response.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_that_changed_nothing_is_304_and_items_carry_the_rule_once() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    for n in 0..300u64 {
        pay(&s, "alice", 100 + n).await;
    }
    let mut measured = Vec::new();
    for limit in [50, 300] {
        let path = format!("/inbox?limit={limit}");
        let (code, etag, first) = get_raw(&s, &path, "olga", None).await;
        assert_eq!(code, 200);
        let (again, _, body) = get_raw(&s, &path, "olga", etag.as_deref()).await;
        // Measured, not asserted as a budget: recorded in BENCHMARKS.md.
        println!(
            "inbox bytes per refresh, 300 holds, limit={limit}: first load {} B, unchanged refresh {} B (HTTP {again})",
            first.len(),
            body.len()
        );
        measured.push((path, etag, again, body));
    }
    for (path, etag, again, body) in measured {
        let etag = etag.expect("GET /inbox answers with an ETag");
        assert_eq!(again, 304, "an unchanged page is not sent again");
        assert!(body.is_empty());
        // Weak and listed forms match too; another tag does not.
        let (weak, _, _) = get_raw(&s, &path, "olga", Some(&format!("\"x\", W/{etag}"))).await;
        assert_eq!(weak, 304);
        let (other, _, _) = get_raw(&s, &path, "olga", Some("\"not-it\"")).await;
        assert_eq!(other, 200);
    }

    // Each of interrupt, rule and reply once: at the item's top level.
    let (_, etag, body) = get_raw(&s, "/inbox?limit=300", "olga", None).await;
    let page: Value = serde_json::from_slice(&body).unwrap();
    let item = &page["result"]["items"][0];
    assert_eq!(item["rule"]["rule"], "bills", "{item:#}");
    assert!(item["interrupt"]["message"].is_string(), "{item:#}");
    assert_eq!(item["part"]["toolRequest"]["name"], "payBill", "the part still answers");
    let meta = item["part"]["metadata"].as_object().cloned().unwrap_or_default();
    for key in ["interrupt", "approvalRule", "approvalReply"] {
        assert!(!meta.contains_key(key), "{key} is sent once, at the top: {item:#}");
    }
    let text = String::from_utf8_lossy(&body);
    assert!(
        !text.contains("\"approvalRule\":"),
        "no item carries the rule twice: {}",
        &text[text.find("\"approvalRule\":").unwrap_or(0).saturating_sub(300)..][..600.min(text.len())]
    );

    // Something changed: the tag changes and the page is sent.
    pay(&s, "bob", 77).await;
    let (code, new_tag, _) = get_raw(&s, "/inbox?limit=300", "olga", etag.as_deref()).await;
    assert_eq!(code, 200);
    assert_ne!(new_tag, etag);
    // Another caller sees another page: never another's tag.
    let (code, _, _) = get_raw(&s, "/inbox?limit=300", "pete", new_tag.as_deref()).await;
    assert_eq!(code, 200, "the page names its caller, so pete's tag differs");
    assert_eq!(paid.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_requester_withdraws_their_own_hold_without_self_approval() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let held = pay(&s, "alice", 50).await;
    let snapshot = held["snapshotId"].as_str().unwrap().to_owned();
    let withdraw = |reason: Option<&str>| {
        let mut data = json!({"snapshotId": snapshot, "decision": "withdraw"});
        if let Some(r) = reason {
            data["reason"] = json!(r);
        }
        json!({"data": data})
    };

    // alice may not answer her own hold (no self-approval) …
    let (_, inbox) = s.get("/inbox", Some("alice")).await;
    assert!(inbox["result"]["items"][0]["refused"].is_string(), "{inbox:#}");
    let refused = s
        .post(
            "/agents/payer/answer",
            json!({"data": {"snapshotId": snapshot, "decision": "deny"}}),
            Some("alice"),
        )
        .await;
    assert_eq!(refused.0, 403, "{:#}", refused.1);
    // … nor may an approver or a stranger withdraw it.
    assert_error(
        &s.post("/agents/payer/answer", withdraw(None), Some("olga")).await,
        403,
        "PERMISSION_DENIED",
        "only the requester",
    );
    let stranger = s.post("/agents/payer/answer", withdraw(None), Some("bob")).await;
    assert_eq!(stranger.0, 404, "{:#}", stranger.1);
    // A withdrawal asks for no grant.
    let mut with_grant = withdraw(None);
    with_grant["data"]["grant"] = json!({"scope": "session"});
    let bad = s.post("/agents/payer/answer", with_grant, Some("alice")).await;
    assert_eq!(bad.0, 400, "{:#}", bad.1);

    // The owner withdraws: decided, the tool never ran, the model was told.
    let (code, body) = s
        .post(
            "/agents/payer/answer",
            withdraw(Some("paid it by phone")),
            Some("alice"),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["decided"], true, "{body:#}");
    assert_eq!(paid.load(Ordering::SeqCst), 0, "a withdrawn call never runs");
    let after = body["result"]["output"]["snapshotId"].as_str().unwrap();
    let (_, snap) = s
        .post(
            "/agents/payer/getSnapshot",
            json!({"data": {"snapshotId": after}}),
            Some("alice"),
        )
        .await;
    assert!(
        snap.to_string()
            .contains("withdrawn by the requester: paid it by phone"),
        "the model hears it was withdrawn: {snap:#}"
    );

    // The audit says withdraw, by alice; the hold is gone from the inbox.
    let (_, audit) = s.get("/audit?decision=withdraw", Some("alice")).await;
    let rows = audit["result"]["items"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{audit:#}");
    assert_eq!(rows[0]["decision"], "withdraw");
    assert_eq!(rows[0]["actor"], "alice");
    assert_eq!(rows[0]["reason"], "withdrawn by the requester: paid it by phone");
    assert_eq!(
        rows[0]["heldInput"],
        json!({"amount": 50}),
        "what was withdrawn, in words"
    );
    let (_, inbox) = s.get("/inbox", Some("olga")).await;
    assert_eq!(inbox["result"]["total"], 0, "{inbox:#}");
    // Too late now: nothing to withdraw twice.
    let again = s.post("/agents/payer/answer", withdraw(None), Some("alice")).await;
    assert_eq!(again.0, 409, "{:#}", again.1);
}

#[tokio::test]
async fn a_rule_from_toml_asks_for_confirmation_offers_reasons_and_requires_one() {
    let paid = Arc::new(AtomicUsize::new(0));
    let s = start(&paid).await;
    let large = pay(&s, "alice", 25_000).await;
    let small = pay(&s, "alice", 40).await;

    let (_, inbox) = s.get("/inbox?order=oldest", Some("olga")).await;
    let items = inbox["result"]["items"].as_array().unwrap();
    let rule_of = |snap: &Value| {
        items
            .iter()
            .find(|i| i["snapshotId"] == *snap)
            .map(|i| i["rule"].clone())
            .unwrap()
    };
    let big = rule_of(&large["snapshotId"]);
    assert_eq!(big["rule"], "large bills");
    assert_eq!(big["confirm"], true, "{big:#}");
    assert_eq!(big["reasonRequired"], true);
    assert_eq!(big["denyReasons"], json!(["Looks like fraud", "Duplicate payment"]));
    let plain = rule_of(&small["snapshotId"]);
    for key in ["confirm", "reasonRequired", "denyReasons"] {
        assert!(
            plain.get(key).is_none(),
            "a rule without the setting says nothing: {plain:#}"
        );
    }

    // A bare denial of the large one is refused, nothing changes.
    let deny = |snap: &Value, reason: &str| json!({"data": {"snapshotId": snap, "decision": "deny", "reason": reason}});
    assert_error(
        &s.post("/agents/payer/answer", deny(&large["snapshotId"], "  "), Some("olga"))
            .await,
        400,
        "INVALID_ARGUMENT",
        "needs a reason",
    );
    let (_, still) = s.get("/inbox", Some("olga")).await;
    assert_eq!(still["result"]["total"], 2);
    let (code, body) = s
        .post(
            "/agents/payer/answer",
            deny(&large["snapshotId"], "Looks like fraud"),
            Some("olga"),
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    // The small one needs none.
    let (code, body) = s
        .post("/agents/payer/answer", deny(&small["snapshotId"], ""), Some("olga"))
        .await;
    assert_eq!(code, 200, "{body:#}");

    // The audit shows what was decided, filtered by actor and decision.
    let (_, audit) = s
        .get("/audit?actor=olga&decision=deny&tool=payBill", Some("olga"))
        .await;
    let rows = audit["result"]["items"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{audit:#}");
    let inputs: Vec<&Value> = rows.iter().map(|r| &r["heldInput"]).collect();
    assert!(inputs.contains(&&json!({"amount": 25000})), "{audit:#}");
    assert!(inputs.contains(&&json!({"amount": 40})), "{audit:#}");
    assert_eq!(paid.load(Ordering::SeqCst), 0);
}

#[test]
fn an_empty_preset_reason_is_a_config_error() {
    let err = Config::parse(
        "[auth]\nroles = [\"finance\"]\n[[approval.rules]]\napprovers = [\"finance\"]\ndeny_reasons = [\"fraud\", \" \"]\n",
        "holdpoint.toml",
    )
    .unwrap_err();
    assert!(err.to_string().contains("deny_reasons"), "{err}");
}
