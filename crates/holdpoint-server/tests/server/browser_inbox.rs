//! The approval page as an operator uses it (issue 34), in headless
//! Chromium over WebDriver: what the page says after a refused or failed
//! answer, a 2-of-N approval as both approvers see it, the session audit
//! opened from a hold, expired holds, calls in doubt settled from the
//! tool's output schema, escalations, deep links and the tab title.
//! Skipped with a loud note when chromedriver is missing, unless `CI=true`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fantoccini::Locator;
use holdpoint::agent::Agent;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{ResumeClaim, SessionStore};
use holdpoint::tool::tool;
use holdpoint::{ScriptedModel, ScriptedTurn, ToolContext};
use holdpoint_server::Server;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::page::Page;
use crate::support::*;

impl Page {
    async fn disabled(&self, css: &str) -> bool {
        self.js(&format!("return document.querySelector(\"{css}\").disabled;"))
            .await
            == json!(true)
    }
}

/// A bearer token is the principal's name: fiona, frank and pete are in
/// finance, cora is the CFO, everyone else a customer.
struct Names;

#[async_trait::async_trait]
impl holdpoint_server::auth::ContextProvider for Names {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<Option<holdpoint_server::auth::Identity>, holdpoint_server::auth::AuthError> {
        let Some(name) = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return Ok(None);
        };
        let identity = holdpoint_server::auth::Identity::new(name);
        Ok(Some(match name {
            "fiona" | "frank" | "pete" => identity.with_roles(["finance"]),
            "cora" => identity.with_roles(["cfo"]),
            "opal" => identity.with_roles(["operator"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

/// The bank of the seed example, its transfers over 10 000 needing two of
/// finance and never their owner.
fn bank_two_of_finance(store: Arc<dyn SessionStore>) -> Agent {
    let policy = holdpoint::approval::Policy::new([holdpoint::approval::RuleSpec {
        name: Some("large transfers".into()),
        agent: Some("bankingAgent".into()),
        tool: Some("transferMoney".into()),
        when: Some("input.amount > 10000".into()),
        approvers: vec!["finance".into()],
        quorum: 2,
        self_approval: false,
        ..Default::default()
    }])
    .unwrap();
    crate::bank::builder("bankingAgent")
        .approval_policy(policy)
        .store(store)
        .build()
        .unwrap()
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Wire {
    amount: f64,
    to: String,
}

/// What a wire tool answers: the operator who settles a call in doubt
/// fills these in, field by field.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Receipt {
    transaction_id: String,
    sent: bool,
}

/// `wireAgent`: every `sendWire` call is held by the approval gate; a wire
/// to "broken" fails hard (the turn fails) when it runs.
fn wires(store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>) -> Agent {
    let send = tool(
        "sendWire",
        "Sends a wire transfer",
        move |_ctx: ToolContext, w: Wire| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                if w.to == "broken" {
                    return Err(holdpoint::tool::ToolError::Error("the bank link is down".into()));
                }
                Ok(Receipt {
                    transaction_id: format!("txn-{}", w.to),
                    sent: true,
                })
            }
        },
    );
    let model = ScriptedModel::from_fn("scripted/wires", |request, _| {
        let last = request.messages.last()?;
        if last.role == holdpoint::message::Role::Tool {
            return Some(ScriptedTurn::text("wire done"));
        }
        let text = last.text();
        let (amount, to) = text.strip_prefix("wire ")?.split_once(" to ")?;
        Some(ScriptedTurn::tool_call(
            "sendWire",
            json!({"amount": amount.parse::<f64>().ok()?, "to": to}),
        ))
    });
    Agent::builder("wireAgent")
        .description("Sends wires after a person approves")
        .model(Arc::new(model))
        .tool(send)
        .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
        .store(store)
        .build()
        .unwrap()
}

async fn raise(s: &TestServer, agent: &str, text: &str, bearer: Option<&str>) -> Value {
    let mut req = s
        .client
        .post(s.url(&format!("/agents/{agent}")))
        .json(&json!({"data": user(text)}));
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let (code, body) = read(req.send().await.unwrap()).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    body["result"].clone()
}

async fn answer_as(s: &TestServer, who: &str, snapshot: &Value, decision: &str) -> Value {
    let (code, body) = read(
        s.client
            .post(s.url("/agents/bankingAgent/answer"))
            .bearer_auth(who)
            .json(&json!({"data": {"snapshotId": snapshot, "decision": decision}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 200, "{body:#}");
    body
}

fn row(session: &Value) -> String {
    format!("li.item[data-session='{}']", session.as_str().unwrap())
}

/// Leaves `snapshot`'s held call in doubt: a resume claimed it and its
/// process died (the claim lapsed).
async fn in_doubt(store: &dyn SessionStore, snapshot: &Value) {
    store
        .claim_resume(
            ResumeClaim {
                snapshot_id: snapshot.as_str().unwrap().to_owned(),
                lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
                takeover: false,
            },
            vec![],
        )
        .await
        .unwrap();
}

/// Records `roles` as approvers of `held`'s call, as the notification
/// worker does when a rule's `escalate_after` passes.
async fn escalate(store: &dyn SessionStore, held: &Value, roles: &[&str]) {
    let part = paused_part(held);
    let reference = part["toolRequest"]["ref"].as_str().map(str::to_owned);
    let tool = part["toolRequest"]["name"].as_str().unwrap().to_owned();
    let roles: Vec<String> = roles.iter().map(|r| (*r).to_owned()).collect();
    let changed = store
        .save_snapshot(
            held["snapshotId"].as_str(),
            Box::new(move |existing| {
                Ok(existing.and_then(|row| {
                    holdpoint::session::outbox::escalated_hold(row, reference.as_deref(), &tool, &roles)
                }))
            }),
        )
        .await
        .unwrap();
    assert!(changed.is_some(), "the hold was escalated");
}

/// Item 1: a refusal (409 while the hold still waits), a failed turn after
/// an approval, and a settle answered with a failed turn are each shown
/// as what the server said, in red; a hold that still waits stays live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_and_failed_answers_say_what_the_server_said() {
    let Some(page) = Page::start_or_skip("refused_and_failed_answers_say_what_the_server_said").await else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(wires(store.clone(), runs.clone()))
            .build()
            .unwrap(),
    )
    .await;
    let busy = raise(&server, "wireAgent", "wire 5 to acme", None).await;
    let broken = raise(&server, "wireAgent", "wire 7 to broken", None).await;
    let doubt = raise(&server, "wireAgent", "wire 9 to broken", None).await;
    in_doubt(store.as_ref(), &doubt["snapshotId"]).await;

    // A tab that does not refresh; meanwhile another process starts
    // resuming `busy` (its claim is live): the answer is refused with 409.
    page.open(&server.url("/?poll=600000"), None).await;
    let busy_row = row(&busy["sessionId"]);
    page.click(&busy_row).await;
    page.wait_text("#detail", &["acme"]).await;
    store
        .claim_resume(
            ResumeClaim {
                snapshot_id: busy["snapshotId"].as_str().unwrap().to_owned(),
                lease_until: chrono::Utc::now() + chrono::Duration::seconds(120),
                takeover: false,
            },
            vec![],
        )
        .await
        .unwrap();
    page.press("//section[@id='detail']", "Approve").await;
    // The server's words, and no one named as having answered it.
    let said = page.wait_text("#detail-result", &["Not done", "409"]).await;
    assert!(!said.contains("Answered elsewhere:"), "{said}");
    assert!(!page.text(&busy_row).await.contains("Answered elsewhere:"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    page.open(&server.url("/?poll=300"), None).await;
    // Approved, and the tool failed hard: red, in the server's words.
    let broken_row = row(&broken["sessionId"]);
    page.click(&broken_row).await;
    page.wait_text("#detail", &["broken"]).await;
    page.press("//section[@id='detail']", "Approve").await;
    let said = page
        .wait_text("#detail-result", &["did not complete", "the bank link is down"])
        .await;
    assert!(!said.contains("the call ran"), "{said}");
    // Past a refresh, it still says what happened here.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(page.text("#detail-result").await.contains("the bank link is down"));
    let color = page
        .js("return getComputedStyle(document.getElementById('detail-result')).color;")
        .await;
    assert_eq!(color, json!("rgb(163, 34, 27)"), "a failure is red");
    assert!(!page.text(&broken_row).await.contains("Answered elsewhere"));

    // Settling a call in doubt by running it again, which fails: not "Settled".
    page.click(".tab[data-view='doubt']").await;
    let card = "#doubt-list li.doubt[data-tool='sendWire']";
    page.wait_text(card, &["sendWire", "may or may not have run"]).await;
    page.press("//li[contains(@class,'doubt')]", "Re-run it…").await;
    page.press("//li[contains(@class,'doubt')]", "Yes, run it again").await;
    let said = page.wait_text(card, &["Not settled", "the bank link is down"]).await;
    assert!(!said.contains("Settled:"), "{said}");
    let color = page
        .js(&format!(
            "return getComputedStyle(document.querySelector(\"{card} .notice.outcome-bad\")).color;"
        ))
        .await;
    assert_eq!(color, json!("rgb(163, 34, 27)"));
    page.close().await;
}

/// Item 2: two of finance approve; each sees a live tally naming who
/// approved, the first may not approve twice, and at the end both names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_finance_see_a_live_tally_and_everyone_who_decided() {
    let Some(page) = Page::start_or_skip("two_of_finance_see_a_live_tally_and_everyone_who_decided").await else {
        return;
    };
    let store = memory();
    let server = TestServer::start(
        Server::builder()
            .agent(bank_two_of_finance(store.clone()))
            .provider(Arc::new(Names))
            .build()
            .unwrap(),
    )
    .await;
    let first = raise(&server, "bankingAgent", "Transfer $50,000 to mallory", Some("alice")).await;
    let second = raise(&server, "bankingAgent", "Transfer $20,000 to savings", Some("bob")).await;
    // This test follows the answered hold's own detail: the page stays on
    // it (?advance=0; moving on after an answer is the default).
    page.open(&server.url("/?poll=300&advance=0"), Some("fiona")).await;
    page.wait_text("#whoami", &["fiona"]).await;
    let first_row = row(&first["sessionId"]);
    page.click(&first_row).await;
    page.wait_text("#detail", &["$50,000.00", "Approvals: 0 of 2"]).await;
    page.press("//section[@id='detail']", "Approve").await;
    page.wait_text(
        "#detail-result",
        &["1 of 2: fiona", "waiting for a second approver — not you"],
    )
    .await;
    // The detail agrees with the notice, and stays so across refreshes.
    page.wait_text(
        ".tally",
        &["Approvals: 1 of 2: fiona — waiting for a second approver — not you"],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(page.text(".tally").await.contains("1 of 2: fiona"));
    // She may not approve twice: Approve is off, and says why.
    assert!(page.disabled("#approve").await, "Approve is off for who approved");
    assert!(!page.disabled("#deny").await, "a denial is still hers to give");
    page.wait_text("#approve-why", &["you approved this already"]).await;
    page.wait_text(&first_row, &["1 of 2: fiona", "you approved"]).await;

    // Frank completes it elsewhere: she sees both names, not "elsewhere: frank".
    answer_as(&server, "frank", &first["snapshotId"], "approve").await;
    let said = page.wait_text(&first_row, &["Approved 2 of 2: fiona, frank"]).await;
    assert!(!said.contains("Answered elsewhere"), "{said}");
    page.wait_text("#detail-result", &["2 of 2: fiona, frank"]).await;

    // Another hold, approved first by pete in another tab: the selected
    // detail follows live, and she completes it, naming both.
    let second_row = row(&second["sessionId"]);
    page.click(&second_row).await;
    page.wait_text("#detail", &["$20,000.00", "Approvals: 0 of 2"]).await;
    answer_as(&server, "pete", &second["snapshotId"], "approve").await;
    page.wait_text(".tally", &["Approvals: 1 of 2: pete — waiting for a second approver"])
        .await;
    assert!(!page.text(".tally").await.contains("not you"));
    assert!(!page.disabled("#approve").await);
    page.press("//section[@id='detail']", "Approve").await;
    page.wait_text("#detail-result", &["Approved 2 of 2: pete, fiona", "the call ran"])
        .await;
    page.close().await;
}

/// Item 3: "Open this session in the full audit" shows that session's
/// decisions only, even when a slower, unfiltered load is in flight, and
/// whatever filters were set before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_audit_shows_that_session_only() {
    let Some(page) = Page::start_or_skip("the_session_audit_shows_that_session_only").await else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), runs.clone()))
            .build()
            .unwrap(),
    )
    .await;
    // Decisions in five other sessions, then one hold approved once
    // (the gate holds it again: it is still listed, with one decision).
    for n in 0..5 {
        let out = raise(&server, "opsAgent", &format!("close acct-{n}"), None).await;
        let (code, _) = server
            .post(
                "/agents/opsAgent/answer",
                json!({"data": {"snapshotId": out["snapshotId"], "decision": "deny", "reason": format!("other {n}")}}),
                None,
            )
            .await;
        assert_eq!(code, 200);
    }
    let mine = raise(&server, "opsAgent", "close acct-mine", None).await;
    let session = mine["sessionId"].as_str().unwrap().to_owned();
    page.open(&server.url("/?poll=400"), None).await;
    page.click(&row(&mine["sessionId"])).await;
    page.wait_text("#detail", &["acct-mine"]).await;
    // A slow network for the unfiltered audit (the biggest answer).
    page.js("const f = window.fetch; window.fetch = (u, i) => (String(u).startsWith('audit') && !String(u).includes('sessionId') ? new Promise((r) => setTimeout(r, 700)).then(() => f(u, i)) : f(u, i)); return true;")
        .await;
    page.click("#open-audit").await;
    page.wait_text("#audit-status", &["Showing 0 of 0"]).await;
    // Past the slow load: still only this session.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(page.text("#audit-status").await.contains("Showing 0 of 0"));
    assert_eq!(
        page.js("return document.querySelectorAll('#audit-table tbody tr').length;")
            .await,
        json!(0)
    );

    // Deny it here; then with another filter set in the audit view, open
    // the session again: exactly its one decision.
    page.click(".tab[data-view='inbox']").await;
    page.click(&row(&mine["sessionId"])).await;
    let reason = page.client.find(Locator::Css("#reason")).await.unwrap();
    reason.send_keys("mine").await.unwrap();
    page.press("//section[@id='detail']", "Deny").await;
    page.wait_text("#detail-result", &["Denied"]).await;
    page.click(".tab[data-view='audit']").await;
    page.client
        .find(Locator::Css("#audit-decision"))
        .await
        .unwrap()
        .select_by_value("edit")
        .await
        .unwrap();
    page.click("#audit-apply").await;
    page.wait_text("#audit-status", &["Showing 0 of 0"]).await;
    page.click(".tab[data-view='inbox']").await;
    page.click("#open-audit").await;
    page.wait_text("#audit-status", &["Showing 1 of 1"]).await;
    let sessions = page
        .js("return [...document.querySelectorAll('#audit-table tbody tr')].map((r) => r.dataset.session);")
        .await;
    assert_eq!(sessions, json!([session]));
    page.wait_text("#audit-table", &["deny", "mine"]).await;
    page.close().await;
}

/// Item 8 (and the title of item 4): an expired hold is counted apart,
/// its clock stopped, Approve off with the reason; the list shows live
/// holds unless asked; the tab title carries the live count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_holds_are_counted_apart_and_cannot_be_approved() {
    let Some(page) = Page::start_or_skip("expired_holds_are_counted_apart_and_cannot_be_approved").await else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), runs.clone()))
            .agent(ops_named(
                "expiringOps",
                store.clone(),
                runs.clone(),
                Some(Duration::from_millis(300)),
            ))
            .build()
            .unwrap(),
    )
    .await;
    let live = raise(&server, "opsAgent", "close acct-live", None).await;
    let late = raise(&server, "expiringOps", "close acct-late", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    page.open(&server.url("/?poll=300"), None).await;
    page.wait_text("#queue-status", &["1 waiting", "1 expired"]).await;
    page.wait_text("#pending-count", &["1"]).await;
    page.wait_js("return document.title === '(1) Holdpoint approvals';")
        .await;
    // Live by default: the expired hold is not in the list.
    assert_eq!(
        page.js("return document.getElementById('f-expired').value;").await,
        json!("false")
    );
    page.wait_text(&row(&live["sessionId"]), &["acct-live"]).await;
    assert_eq!(
        page.js("return document.querySelectorAll('li.item').length;").await,
        json!(1)
    );

    page.client
        .find(Locator::Css("#f-expired"))
        .await
        .unwrap()
        .select_by_value("true")
        .await
        .unwrap();
    let late_row = row(&late["sessionId"]);
    let before = page
        .wait_text(&late_row, &["acct-late", "expired", "then expired", "expired at"])
        .await;
    page.click(&late_row).await;
    page.wait_text("#detail", &["acct-late", "Expired: it can no longer be approved"])
        .await;
    assert!(page.disabled("#approve").await, "Approve is off for an expired hold");
    page.wait_text("#approve-why", &["expired", "can no longer be approved"])
        .await;
    // Its clock stopped: the row reads the same a moment later.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(page.text(&late_row).await, before);
    // A denial still reaches the agent.
    page.client
        .find(Locator::Css("#reason"))
        .await
        .unwrap()
        .send_keys("too late")
        .await
        .unwrap();
    page.press("//section[@id='detail']", "Deny").await;
    page.wait_text("#detail-result", &["Denied with reason \"too late\""])
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    page.close().await;
}

/// Item 13: a call in doubt is settled with a form built from the tool's
/// output schema; once settled the ways to settle it again go away; and
/// finance sees a hold that was escalated to the CFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_doubt_settles_from_the_output_schema_and_escalations_show() {
    let Some(page) = Page::start_or_skip("in_doubt_settles_from_the_output_schema_and_escalations_show").await else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(wires(store.clone(), runs.clone()))
            .agent(bank_two_of_finance(store.clone()))
            .provider(Arc::new(Names))
            .build()
            .unwrap(),
    )
    .await;
    let doubt = raise(&server, "wireAgent", "wire 12 to acme", Some("fiona")).await;
    in_doubt(store.as_ref(), &doubt["snapshotId"]).await;
    let big = raise(&server, "bankingAgent", "Transfer $90,000 to mallory", Some("alice")).await;
    escalate(store.as_ref(), &big, &["cfo"]).await;

    page.open(&server.url("/?poll=300"), Some("fiona")).await;
    let big_row = row(&big["sessionId"]);
    page.wait_text(&big_row, &["$90,000.00", "escalated to cfo"]).await;
    page.click(&big_row).await;
    page.wait_text("#detail", &["Escalated", "cfo may answer it too"]).await;

    page.click(".tab[data-view='doubt']").await;
    let card = "#doubt-list li.doubt[data-tool='sendWire']";
    page.wait_text(card, &["sendWire", "may or may not have run", "acme"])
        .await;
    // The form has the output's fields, labelled, not a JSON text area.
    page.wait_text(card, &["Transaction id", "Sent"]).await;
    assert_eq!(
        page.js(&format!(
            "return document.querySelectorAll(\"{card} textarea\").length;"
        ))
        .await,
        json!(0)
    );
    page.client
        .find(Locator::Css(&format!("{card} [data-field='transactionId'] input")))
        .await
        .unwrap()
        .send_keys("txn-found-by-hand")
        .await
        .unwrap();
    page.click(&format!("{card} [data-field='sent'] input")).await;
    page.press("//li[contains(@class,'doubt')]", "Settle with this result")
        .await;
    page.wait_text(card, &["Settled with what happened"]).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "settling with a result runs nothing");
    // Settled: nothing left to press that would settle it again.
    let buttons = page
        .js(&format!("return [...document.querySelectorAll(\"{card} button\")].map((b) => b.textContent).filter((t) => t !== 'Copy');"))
        .await;
    assert_eq!(buttons, json!([]), "no re-run or settle after settling");
    let audit = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&holdpoint::session::AuditQuery::default())
        .await
        .unwrap();
    let settled: Vec<_> = audit.iter().filter(|r| r.settles).collect();
    assert_eq!(settled.len(), 1, "{audit:#?}");
    assert_eq!(settled[0].decision.as_str(), "respond");
    page.close().await;
}

/// Item 4: a notification's link (`?agent=&sessionId=&snapshotId=&ref=`)
/// opens that hold, selected, one click from approved; a link to a hold
/// that no longer waits says who answered it; the title counts live holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_link_opens_its_hold_and_approving_takes_one_click() {
    let Some(page) = Page::start_or_skip("a_notification_link_opens_its_hold_and_approving_takes_one_click").await
    else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(ops(store.clone(), runs.clone()))
            .build()
            .unwrap(),
    )
    .await;
    let mut held = Vec::new();
    for n in 1..=3 {
        held.push(raise(&server, "opsAgent", &format!("close acct-{n}"), None).await);
    }
    let (code, _) = server
        .post(
            "/agents/opsAgent/answer",
            json!({"data": {"snapshotId": held[2]["snapshotId"], "decision": "deny", "reason": "not this one"}}),
            None,
        )
        .await;
    assert_eq!(code, 200);
    let link = |h: &Value| {
        let part = paused_part(h);
        format!(
            "/?poll=300&agent=opsAgent&sessionId={}&snapshotId={}&ref={}",
            h["sessionId"].as_str().unwrap(),
            h["snapshotId"].as_str().unwrap(),
            part["toolRequest"]["ref"].as_str().unwrap_or("")
        )
    };
    page.open(&server.url(&link(&held[1])), None).await;
    page.wait_text(&format!("{}.selected", row(&held[1]["sessionId"])), &["acct-2"])
        .await;
    page.wait_text("#detail", &["close acct-2", "acct-2"]).await;
    page.wait_js("return document.title === '(2) Holdpoint approvals';")
        .await;
    page.press("//section[@id='detail']", "Approve").await;
    page.wait_text("#detail-result", &["Approved: the call ran"]).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    page.wait_js("return document.title === '(1) Holdpoint approvals';")
        .await;

    // A link to a hold answered meanwhile: who answered, and a way back.
    page.open(&server.url(&link(&held[2])), None).await;
    page.wait_text("#link-gone", &["no longer waits", "deny", "not this one"])
        .await;
    page.press("//section[@id='detail']", "Show all holds").await;
    page.wait_text(&row(&held[0]["sessionId"]), &["acct-1"]).await;
    page.close().await;
}
