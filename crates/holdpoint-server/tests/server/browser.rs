//! The approval page in headless Chromium, driven over WebDriver
//! (chromedriver + fantoccini). Skipped with a loud note when chromedriver
//! is missing, unless `CI=true`.
//!
//! Set `HOLDPOINT_UPDATE_SCREENSHOT=1` to refresh the screenshots in `docs/`
//! (`inbox-desktop.png`, `inbox-phone.png`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use holdpoint::session::SessionStore;
use holdpoint_server::Server;
use serde_json::{Value, json};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

impl Browser {
    async fn start_or_skip(test: &str) -> Option<Browser> {
        let (Some(driver), Some(chromium)) = (
            which("chromedriver"),
            which("chromium").or_else(|| which("chromium-browser")),
        ) else {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "{test}: chromium and chromedriver are required in CI"
            );
            eprintln!(
                "SKIPPED {test}: install chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
            );
            return None;
        };
        let port = free_port();
        let driver = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        Some(Browser {
            client,
            driver,
            _profile: profile,
        })
    }

    async fn open(&self, url: &str, credential: Option<&str>) {
        self.client.goto(url).await.unwrap();
        if let Some(credential) = credential {
            let input = self.client.find(Locator::Css("#token")).await.unwrap();
            input.clear().await.unwrap();
            input.send_keys(credential).await.unwrap();
            self.client
                .find(Locator::Css("#use-token"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
        }
    }

    /// Waits until an element matching `css` has text containing every one
    /// of `parts`; returns its text.
    async fn wait_text(&self, css: &str, parts: &[&str]) -> String {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        loop {
            if let Ok(found) = self.client.find_all(Locator::Css(css)).await {
                for e in found {
                    if let Ok(text) = e.text().await {
                        if parts.iter().all(|p| text.contains(p)) {
                            return text;
                        }
                        last = text;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no {css} with {parts:?} within {WAIT:?}; last text: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        let e = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        e.click().await.unwrap();
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let out = std::env::temp_dir().join(format!("holdpoint-{name}.png"));
        std::fs::write(&out, &png).unwrap();
        if std::env::var("HOLDPOINT_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
            let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(format!("{name}.png")), &png).unwrap();
        }
    }

    async fn close(self) {
        let Browser { client, .. } = &self;
        let _ = client.clone().close().await;
    }
}

impl Browser {
    /// Runs `script` (a function body) in the page and returns its value.
    async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Waits until `script` returns `true`.
    async fn wait_js(&self, script: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.js(script).await == json!(true) {
                return;
            }
            assert!(Instant::now() < deadline, "not true within {WAIT:?}: {script}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The button whose accessible name is exactly `name` (its text, with
    /// no aria-label to override it), inside `scope`.
    async fn button(&self, scope: &str, name: &str) -> fantoccini::elements::Element {
        let xpath =
            format!("{scope}//button[normalize-space(.)='{name}' and not(@aria-label) and not(@aria-labelledby)]");
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no button named {name:?}: {e}"))
    }

    /// Asserts nothing on the page is wider than the viewport.
    async fn assert_no_sideways_scroll(&self, what: &str) {
        let got = self
            .js("return [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth];")
            .await;
        let (doc, body, inner) = (
            got[0].as_f64().unwrap(),
            got[1].as_f64().unwrap(),
            got[2].as_f64().unwrap(),
        );
        assert!(inner <= 400.0, "the viewport is a phone's: {inner}");
        let wide = self
            .js("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5).slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));")
            .await;
        assert!(
            doc <= inner && body <= inner,
            "{what}: {doc}/{body} px wide in a {inner} px viewport; too wide: {wide}"
        );
    }
}

/// A bearer token is the principal's name: olga and pete are in finance.
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
            "olga" | "pete" => identity.with_roles(["finance"]),
            _ => identity.with_roles(["customer"]),
        }))
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Reply {
    approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feedback: Option<String>,
}

impl holdpoint::approval::ApprovalReply for Reply {
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

/// The bank: `transferMoney` declares its yes/no reply and counts the
/// transactions it makes; transfers over 10 000 need two of finance.
fn bank_with_rule(store: Arc<dyn SessionStore>, made: &Arc<AtomicUsize>) -> holdpoint::agent::Agent {
    use holdpoint::tool::{ResumableTool, ToolContext};
    let made = Arc::clone(made);
    let transfer = ResumableTool::define(
        "transferMoney",
        "Moves money between accounts once approved",
        move |ctx: ToolContext, t: crate::bank::Transfer, reply: Option<Reply>| {
            let made = Arc::clone(&made);
            async move {
                match reply {
                    None => {
                        Err(ctx.interrupt(json!({"details": format!("Transfer ${:.2} to {}", t.amount, t.to_account)})))
                    }
                    Some(r) if r.approved => {
                        made.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"success": true, "transactionId": "txn-123"}))
                    }
                    Some(r) => Err(ctx.fail(format!("declined: {}", r.feedback.unwrap_or_default()))),
                }
            }
        },
    )
    .unwrap()
    .approval_reply()
    .unwrap();
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
    holdpoint::agent::Agent::builder("bankingAgent")
        .description("Moves money after approval")
        .model(Arc::new(crate::bank::model()))
        .tool(transfer)
        .approval_policy(policy)
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

fn item(session: &Value) -> String {
    format!("li.item[data-session='{}']", session.as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_holds_are_all_counted_reachable_and_fit_a_phone() {
    let Some(browser) = Browser::start_or_skip("three_hundred_holds_are_all_counted_reachable_and_fit_a_phone").await
    else {
        return;
    };
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = ops(store.clone(), runs.clone());
    let server = TestServer::start(Server::builder().agent(agent.clone()).build().unwrap()).await;
    let mut order = Vec::new();
    for n in 0..300 {
        let out = agent
            .run(
                holdpoint::agent::AgentInput::text(format!("close acct-{n}")),
                holdpoint::agent::AgentInit::new(),
            )
            .await
            .unwrap();
        order.push(out.snapshot_id.unwrap());
    }
    browser.open(&server.url("/?poll=500"), None).await;
    browser.wait_text("#pending-count", &["300"]).await;
    browser
        .wait_text("#queue-status", &["300 waiting", "showing 50 of 300"])
        .await;
    // Oldest first: the one that waited longest is at the top and selected.
    let first = format!("li.item[data-snapshot='{}']", order[0]);
    browser
        .wait_text(&format!("{first}.selected"), &["closeAccount", "acct-0"])
        .await;
    browser
        .wait_text(
            "#detail",
            &["closeAccount", "Closes an account", "close acct-0", "Account", "acct-0"],
        )
        .await;

    // Newest first, then "load more" down to the oldest: all 300, none missing.
    browser
        .client
        .find(Locator::Css("#f-order"))
        .await
        .unwrap()
        .select_by_value("newest")
        .await
        .unwrap();
    browser
        .wait_text(&format!("li.item[data-snapshot='{}']", order[299]), &["acct-299"])
        .await;
    for _ in 0..10 {
        let shown = browser.js("return document.querySelectorAll('li.item').length;").await;
        if shown == json!(300) {
            break;
        }
        browser.click("#load-more").await;
        browser
            .wait_js(&format!(
                "return document.querySelectorAll('li.item').length > {shown};"
            ))
            .await;
    }
    browser
        .wait_text("#queue-status", &["300 waiting", "showing 300 of 300"])
        .await;
    let last = browser
        .js("const l = document.querySelectorAll('li.item'); return l[l.length - 1].dataset.snapshot;")
        .await;
    assert_eq!(last, json!(order[0]), "the oldest is reachable at the end");
    let unique = browser
        .js("return new Set([...document.querySelectorAll('li.item')].map(e => e.dataset.snapshot)).size;")
        .await;
    assert_eq!(unique, json!(300), "no hold repeated or missing");
    assert!(browser.js("return document.getElementById('load-more').hidden;").await == json!(true));

    // A phone: nothing wider than the viewport, in the inbox and the audit.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open(&server.url("/?poll=500"), None).await;
    browser.wait_text("#queue-status", &["300 waiting"]).await;
    browser.wait_text("#detail", &["acct-0"]).await;
    browser.assert_no_sideways_scroll("the inbox").await;
    browser.screenshot("inbox-phone").await;
    let held = &order[0];
    let (code, _) = server
        .post(
            "/agents/opsAgent/answer",
            json!({"data": {"snapshotId": held, "decision": "deny", "reason": "a reason long enough to need wrapping on a phone screen"}}),
            None,
        )
        .await;
    assert_eq!(code, 200);
    browser.click(".tab[data-view='audit']").await;
    browser
        .wait_text("#audit-table", &["deny", "a reason long enough"])
        .await;
    browser.assert_no_sideways_scroll("the audit").await;
    let stacked = browser
        .js("return getComputedStyle(document.querySelector('#audit-table td')).display;")
        .await;
    assert_eq!(stacked, json!("grid"), "table cells stack as rows on a phone");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_denies_a_transfer_with_a_reason_typed_through_a_new_arrival() {
    let Some(browser) =
        Browser::start_or_skip("an_approver_denies_a_transfer_with_a_reason_typed_through_a_new_arrival").await
    else {
        return;
    };
    let store = memory();
    let made = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(bank_with_rule(store.clone(), &made))
            .provider(Arc::new(Names))
            .build()
            .unwrap(),
    )
    .await;
    let held = raise(&server, "bankingAgent", "Transfer $50,000 to mallory", Some("alice")).await;
    browser.open(&server.url("/?poll=300"), Some("olga")).await;
    browser.wait_text("#whoami", &["olga", "finance"]).await;
    let row = item(&held["sessionId"]);
    browser
        .wait_text(
            &row,
            &[
                "transferMoney",
                "bankingAgent",
                "$50,000.00",
                "for alice",
                "waiting for you",
            ],
        )
        .await;
    // The context to decide: the request, the tool, the input as fields
    // with the large amount flagged, the rule and who may approve.
    browser
        .wait_text(
            "#detail",
            &[
                "Transfer $50,000 to mallory",
                "Moves money between accounts once approved",
                "Amount",
                "$50,000.00",
                "large amount",
                "To account",
                "mallory",
                "Rule \"large transfers\": finance may approve (not the owner); 2 approvals needed",
                "Approvals: 0 of 2",
            ],
        )
        .await;
    // Each hold is a labelled region with a heading: what is at stake.
    let labelled = browser
        .js("const s = document.querySelector('li.item section'); const h = document.getElementById(s.getAttribute('aria-labelledby')); return [s.tagName, h.tagName, h.textContent];")
        .await;
    assert_eq!(labelled, json!(["SECTION", "H3", "$50,000.00 → mallory"]));

    // Start typing a reason; a new hold arrives; the words and the focus stay.
    browser.button("//section[@id='detail']", "Deny").await;
    let reason = browser.client.find(Locator::Css("#reason")).await.unwrap();
    reason.click().await.unwrap();
    reason.send_keys("not to an account ").await.unwrap();
    let second = raise(&server, "bankingAgent", "Transfer $20,000 to savings", Some("bob")).await;
    browser.wait_text(&item(&second["sessionId"]), &["$20,000.00"]).await;
    browser.wait_text("#queue-status", &["2 waiting"]).await;
    reason.send_keys("we know").await.unwrap();
    let focused = browser
        .js("return [document.activeElement.id, document.activeElement.value];")
        .await;
    assert_eq!(focused, json!(["reason", "not to an account we know"]));
    assert!(
        browser
            .js(&format!(
                "return document.querySelector(\"{row}\").classList.contains('selected');"
            ))
            .await
            == json!(true)
    );

    browser.screenshot("inbox-desktop").await;

    // Deny, found by its accessible name: a `deny` in the audit, no transaction.
    browser
        .button("//section[@id='detail']", "Deny")
        .await
        .click()
        .await
        .unwrap();
    // The page moves on to the next hold and says, on top, what the answer did.
    browser
        .wait_text(
            "#detail #last-answer",
            &[
                "Answered: $50,000.00 → mallory",
                "Denied with reason \"not to an account we know\"",
                "did not run",
            ],
        )
        .await;
    browser.wait_text("#detail-title", &["$20,000.00 → savings"]).await;
    browser.wait_text("#live", &["Denied"]).await;
    let class = browser
        .js(&format!("return document.querySelector(\"{row}\").className;"))
        .await;
    assert!(class.as_str().unwrap().contains("outcome-denied"), "{class}");
    let color = browser
        .js("return getComputedStyle(document.getElementById('last-answer')).color;")
        .await;
    assert_eq!(color, json!("rgb(163, 34, 27)"), "a denial is red, not a green Done");
    let trail = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&holdpoint::session::AuditQuery::default())
        .await
        .unwrap();
    let rows: Vec<_> = trail
        .iter()
        .filter(|r| r.session_id == held["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].decision.as_str(), "deny");
    assert_eq!(rows[0].reason.as_deref(), Some("not to an account we know"));
    assert_eq!(rows[0].actor.as_deref(), Some("olga"));
    assert_eq!(made.load(Ordering::SeqCst), 0, "no transaction was made");

    // The second transfer: olga's approval is 1 of 2; pete completes it
    // elsewhere and the page says who did what, keeping the item visible.
    let second_row = item(&second["sessionId"]);
    browser.click(&second_row).await;
    browser.wait_text("#detail", &["$20,000.00", "Approvals: 0 of 2"]).await;
    browser
        .button("//section[@id='detail']", "Approve")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_text("#detail-result", &["1 of 2: olga approvals recorded"])
        .await;
    browser.wait_text(&second_row, &["1 of 2: olga"]).await;
    answer_as(&server, "pete", &second["snapshotId"], "approve").await;
    browser.wait_text(&second_row, &["Approved 2 of 2: olga, pete"]).await;
    assert_eq!(made.load(Ordering::SeqCst), 1, "the approved transfer ran once");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyboard_moves_approves_and_denies_and_advanced_edits_and_responds() {
    let Some(browser) =
        Browser::start_or_skip("the_keyboard_moves_approves_and_denies_and_advanced_edits_and_responds").await
    else {
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
                Some(Duration::from_secs(1)),
            ))
            .build()
            .unwrap(),
    )
    .await;
    let mut held = Vec::new();
    for n in 1..=4 {
        held.push(raise(&server, "opsAgent", &format!("close acct-{n}"), None).await);
    }
    browser.open(&server.url("/?poll=400"), None).await;
    browser.wait_text("#queue-status", &["4 waiting"]).await;
    browser
        .wait_text(&format!("{}.selected", item(&held[0]["sessionId"])), &["acct-1"])
        .await;
    let body = browser.client.find(Locator::Css("body")).await.unwrap();
    // j moves down, k up; a focuses Approve and Enter presses it.
    body.send_keys("j").await.unwrap();
    browser
        .wait_text(&format!("{}.selected", item(&held[1]["sessionId"])), &["acct-2"])
        .await;
    body.send_keys("jk").await.unwrap();
    browser
        .wait_text(&format!("{}.selected", item(&held[1]["sessionId"])), &["acct-2"])
        .await;
    browser.wait_text("#detail", &["acct-2"]).await;
    let active = browser.client.active_element().await.unwrap();
    active.send_keys("a").await.unwrap();
    browser.wait_js("return document.activeElement.id === 'approve';").await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    // Then the next hold is shown, the answer's outcome on top.
    browser
        .wait_text("#detail #last-answer", &["Approved: the call ran", "ops result"])
        .await;
    browser
        .wait_text(&format!("{}.selected", item(&held[2]["sessionId"])), &["acct-3"])
        .await;
    browser.wait_text("#live", &["Approved"]).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // d focuses the reason; Enter denies with it.
    browser.click(&item(&held[2]["sessionId"])).await;
    browser.wait_text("#detail", &["acct-3"]).await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("d")
        .await
        .unwrap();
    browser.wait_js("return document.activeElement.id === 'reason';").await;
    browser
        .client
        .active_element()
        .await
        .unwrap()
        .send_keys("wrong account\u{E007}")
        .await
        .unwrap();
    browser
        .wait_text("#detail #last-answer", &["Denied with reason \"wrong account\""])
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    browser.wait_text("#outcomes", &["Approved", "Denied"]).await;

    // Advanced: edit the input, then approve (recorded as an edit; the gate
    // holds the revised call again).
    browser.click(&item(&held[3]["sessionId"])).await;
    browser.wait_text("#detail", &["acct-4"]).await;
    browser.click("#detail details.advanced summary").await;
    let field = browser
        .client
        .find(Locator::Css("#detail [data-field='account'] input"))
        .await
        .unwrap();
    field.clear().await.unwrap();
    field.send_keys("acct-44").await.unwrap();
    browser
        .button("//section[@id='detail']", "Approve edited input")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_text("#detail #last-answer", &["Edited", "paused again"])
        .await;
    browser.wait_text("li.item:not(.done)", &["acct-44"]).await;
    browser
        .js("[...document.querySelectorAll('li.item:not(.done)')].find(e => e.textContent.includes('acct-44')).click(); return true;")
        .await;
    browser.wait_text("#detail", &["acct-44"]).await;
    // Respond instead: the tool does not run.
    browser.click("#detail details.advanced summary").await;
    let output = browser
        .client
        .find(Locator::Css("#detail fieldset:nth-of-type(2) textarea"))
        .await
        .unwrap();
    output.send_keys("{\"closed\": \"by hand\"}").await.unwrap();
    browser
        .button("//section[@id='detail']", "Respond without running")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_text("#detail #last-answer", &["Responded", "did not run", "by hand"])
        .await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "neither the edit nor the response ran the tool"
    );
    let decisions: Vec<Value> = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&holdpoint::session::AuditQuery::default())
        .await
        .unwrap()
        .iter()
        .map(|r| json!(r.decision.as_str()))
        .collect();
    for d in ["approve", "deny", "edit", "respond"] {
        assert!(decisions.contains(&json!(d)), "{d} in {decisions:?}");
    }

    // An expired hold says so and cannot be approved; amber, not green.
    let late = raise(&server, "expiringOps", "close acct-9", None).await;
    let late_row = item(&late["sessionId"]);
    browser.wait_text(&late_row, &["acct-9"]).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    browser.wait_text(&late_row, &["expired"]).await;
    browser.click(&late_row).await;
    browser
        .wait_text("#detail", &["Expired: it can no longer be approved"])
        .await;
    // Approve is off, saying why (issue 34, item 8).
    browser
        .wait_js("return document.getElementById('approve').disabled;")
        .await;
    browser
        .wait_text("#approve-why", &["expired", "can no longer be approved"])
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The session's audit inline, the transcript, and the full audit view.
    browser.click("#detail details.inline-transcript summary").await;
    browser
        .wait_text("#detail .inline-transcript", &["close acct-9", "closeAccount"])
        .await;
    browser.click(".tab[data-view='audit']").await;
    browser.wait_text("#audit-status", &["Showing 4 of 4 decisions"]).await;
    browser
        .client
        .find(Locator::Css("#audit-decision"))
        .await
        .unwrap()
        .select_by_value("deny")
        .await
        .unwrap();
    browser.click("#audit-apply").await;
    browser.wait_text("#audit-status", &["Showing 1 of 1"]).await;
    browser.wait_text("#audit-table", &["deny", "wrong account"]).await;
    browser.close().await;
}

/// The WCAG contrast ratios of every visible element matching `css`:
/// its text colour (or, with `border`, its border colour) against the
/// first opaque background behind it. Returns `[[ratio, description]]`.
const CONTRAST_JS: &str = r#"
const [css, border] = arguments;
const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
const lum = ([r, g, b]) => {
  const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
};
const backOf = (e) => {
  for (let n = e; n; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.99)) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
return [...document.querySelectorAll(css)].filter((e) => e.offsetParent !== null).map((e) => {
  const s = getComputedStyle(e);
  const fg = rgb(border ? s.borderTopColor : s.color).slice(0, 3);
  const bg = border ? backOf(e.parentElement) : backOf(e);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return [(a + 0.05) / (b + 0.05), e.tagName + "." + e.className + " " + (e.textContent || "").slice(0, 30)];
});
"#;

impl Browser {
    async fn assert_contrast(&self, css: &str, border: bool, min: f64) {
        let got = self
            .client
            .execute(CONTRAST_JS, vec![json!(css), json!(border)])
            .await
            .unwrap();
        let all = got.as_array().unwrap();
        assert!(!all.is_empty(), "nothing visible matches {css}");
        for pair in all {
            let ratio = pair[0].as_f64().unwrap();
            assert!(ratio >= min, "{css}: contrast {ratio:.2} < {min} for {}", pair[1]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_a_double_answer_calls_in_doubt_settled_and_aa_contrast() {
    let Some(browser) = Browser::start_or_skip("sign_in_a_double_answer_calls_in_doubt_settled_and_aa_contrast").await
    else {
        return;
    };
    let f = fixture(true).await;
    let s = &f.server;
    // Without a credential the page says what to do; an API key signs in.
    browser.open(&s.url("/?poll=400"), None).await;
    browser.wait_text("#banner", &["Sign in"]).await;
    browser.open(&s.url("/?poll=400"), Some(ALICE_APPROVER_KEY)).await;
    browser.wait_text("#whoami", &["Signed in as alice"]).await;
    let first = s
        .post(
            "/agents/opsAgent",
            json!({"data": user("close acct-1")}),
            Some(ALICE_KEY),
        )
        .await
        .1["result"]
        .clone();
    let doubt = s
        .post(
            "/agents/opsAgent",
            json!({"data": user("close acct-2")}),
            Some(ALICE_KEY),
        )
        .await
        .1["result"]
        .clone();
    browser.wait_text("#queue-status", &["2 waiting"]).await;
    browser.wait_text(&item(&first["sessionId"]), &["acct-1"]).await;

    // Text, controls and borders meet WCAG AA, answered rows included.
    browser
        .assert_contrast(
            ".muted, .badge, .item-title, .item-summary, label, .rule, .keys",
            false,
            4.5,
        )
        .await;
    browser.assert_contrast("button", false, 4.5).await;
    browser.assert_contrast("input, select", true, 3.0).await;

    // Another tab answers first; this page, not refreshing, is told so
    // plainly and nothing runs twice.
    browser.open(&s.url("/?poll=600000"), None).await;
    browser
        .wait_text(&format!("{}.selected", item(&first["sessionId"])), &["acct-1"])
        .await;
    let (code, _) = s
        .post(
            "/agents/opsAgent/answer",
            json!({"data": {"snapshotId": first["snapshotId"], "decision": "approve"}}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(code, 200);
    browser
        .button("//section[@id='detail']", "Approve")
        .await
        .click()
        .await
        .unwrap();
    // Told so on top of the next hold's detail (the page moves on).
    browser
        .wait_text("#detail #last-answer", &["Already answered elsewhere"])
        .await;
    browser
        .assert_contrast("#last-answer, #last-answer button", false, 4.5)
        .await;
    browser
        .wait_text(&item(&first["sessionId"]), &["Answered elsewhere: alice — approve"])
        .await;
    assert_eq!(f.runs.load(Ordering::SeqCst), 1, "the tool ran once");
    browser
        .assert_contrast("li.item.done .item-outcome, li.item.done .item-title", false, 4.5)
        .await;

    // A resume claimed the second call and its process died: in doubt.
    f.store
        .claim_resume(
            holdpoint::session::ResumeClaim {
                snapshot_id: doubt["snapshotId"].as_str().unwrap().to_owned(),
                lease_until: chrono::Utc::now() - chrono::Duration::seconds(1),
                takeover: false,
            },
            vec![],
        )
        .await
        .unwrap();
    browser.open(&s.url("/?poll=400"), None).await;
    browser.click(".tab[data-view='doubt']").await;
    browser.wait_text("#doubt-count", &["1"]).await;
    let card = "#doubt-list li.doubt[data-tool='closeAccount']";
    browser
        .wait_text(card, &["closeAccount", "may or may not have run", "acct-2"])
        .await;
    // Re-running asks for a confirmation first.
    browser
        .button("//li[contains(@class,'doubt')]", "Re-run it…")
        .await
        .click()
        .await
        .unwrap();
    browser
        .button("//li[contains(@class,'doubt')]", "Yes, run it again")
        .await;
    // The operator checked: it ran. Settle with what happened.
    browser
        .client
        .find(Locator::Css(&format!("{card} textarea")))
        .await
        .unwrap()
        .send_keys("{\"closed\": \"acct-2\"}")
        .await
        .unwrap();
    browser
        .button("//li[contains(@class,'doubt')]", "Settle with this result")
        .await
        .click()
        .await
        .unwrap();
    browser.wait_text(card, &["Settled with what happened"]).await;
    assert_eq!(f.runs.load(Ordering::SeqCst), 1, "settling with a result runs nothing");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_with_openid_connect_and_pkce() {
    let Some(browser) = Browser::start_or_skip("an_approver_signs_in_with_openid_connect_and_pkce").await else {
        return;
    };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc");
    let (Some(node), true) = (
        which("node"),
        dir.join("node_modules/oauth2-mock-server/package.json").is_file(),
    ) else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "node and oauth2-mock-server are required in CI"
        );
        eprintln!(
            "SKIPPED an_approver_signs_in_with_openid_connect_and_pkce: npm ci --prefix crates/holdpoint-server/tests/oidc"
        );
        return;
    };
    let mut provider = tokio::process::Command::new(node)
        .arg("login.mjs")
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let _stdin = provider.stdin.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(provider.stdout.take().unwrap()));
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider started")
        .unwrap()
        .unwrap();
    let issuer = serde_json::from_str::<Value>(&first).unwrap()["issuer"]
        .as_str()
        .unwrap()
        .to_owned();
    // The server verifies the page's token with its own JWT verifier, by
    // OIDC discovery on the same issuer.
    let jwt = holdpoint_server::auth::JwtVerifier::jwks(holdpoint_server::auth::JwksSource::issuer(&issuer))
        .unwrap()
        .issuer(&issuer)
        .audience("holdpoint-page")
        .roles_claim("roles");

    let store = memory();
    let made = Arc::new(AtomicUsize::new(0));
    let server = TestServer::start(
        Server::builder()
            .agent(bank_with_rule(store.clone(), &made))
            .jwt(jwt)
            .provider(Arc::new(Names))
            .page_login(holdpoint_server::PageLogin::new(&issuer, "holdpoint-page").unwrap())
            .build()
            .unwrap(),
    )
    .await;
    // The page may talk to the issuer, and nothing else beyond itself.
    let page = server.client.get(server.url("/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains(&format!("connect-src 'self' {issuer};")), "{csp}");
    let held = raise(&server, "bankingAgent", "Transfer $50,000 to mallory", Some("alice")).await;

    // Sign in: to the provider and back, the code exchanged with PKCE.
    browser.open(&server.url("/?poll=400"), None).await;
    browser
        .button("//header", "Sign in with SSO")
        .await
        .click()
        .await
        .unwrap();
    // The verifier names a token's principal by its issuer and subject.
    browser
        .wait_text("#whoami", &["Signed in as jwt:", "#olga", "roles: finance"])
        .await;
    let url = browser.client.current_url().await.unwrap();
    assert!(
        url.query().is_none_or(|q| !q.contains("code=")),
        "the code is not left in the address: {url}"
    );
    // As olga (finance) the held transfer is hers to answer; API keys and
    // other bearer tokens keep working beside the sign-in.
    browser
        .wait_text(&item(&held["sessionId"]), &["$50,000.00", "waiting for you"])
        .await;
    browser
        .button("//section[@id='detail']", "Approve")
        .await
        .click()
        .await
        .unwrap();
    browser.wait_text("#detail-result", &["1 of 2: jwt:", "#olga"]).await;
    assert_eq!(made.load(Ordering::SeqCst), 0);
    browser.close().await;
}
