//! The approval page in headless Chromium, driven over WebDriver
//! (chromedriver + fantoccini). Skipped with a loud note when chromedriver
//! is missing, unless `CI=true`.
//!
//! Set `HOLDPOINT_UPDATE_SCREENSHOT=1` to refresh `docs/approval-page.png`.

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

    async fn type_into(&self, css: &str, text: &str) {
        let e = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        e.send_keys(text).await.unwrap();
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

async fn raise(s: &TestServer, agent: &str, text: &str, key: Option<&str>) -> Value {
    let (code, body) = s
        .post(&format!("/agents/{agent}"), json!({"data": user(text)}), key)
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    body["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_transfer_appears_and_approving_it_completes_the_turn() {
    let Some(browser) = Browser::start_or_skip("a_held_transfer_appears_and_approving_it_completes_the_turn").await
    else {
        return;
    };
    let f = fixture(true).await;
    let s = &f.server;
    // Without a credential the page says what to do.
    browser.open(&s.url("/?poll=400"), None).await;
    browser.wait_text("#banner", &["Sign in"]).await;
    browser.open(&s.url("/?poll=400"), Some(ALICE_APPROVER_KEY)).await;
    browser.wait_text("#empty", &["Nothing is waiting"]).await;

    // The program (alice's API key) starts a transfer; the page shows it without a reload.
    let held = raise(s, "bankingAgent", "Transfer $500 to savings", Some(ALICE_KEY)).await;
    let session = held["sessionId"].as_str().unwrap().to_owned();
    let card = "li.card[data-tool='transferMoney']";
    let text = browser
        .wait_text(
            card,
            &[
                "transferMoney",
                "Transfer $500.00 to savings",
                "bankingAgent",
                "\"toAccount\": \"savings\"",
                "waiting",
            ],
        )
        .await;
    assert!(text.contains(&session[..8]), "{text}");
    let ops = raise(s, "opsAgent", "close acct-42", Some(ALICE_KEY)).await;
    browser
        .wait_text(
            "li.card[data-tool='closeAccount']",
            &["Tool not in approved list: closeAccount", "approval gate"],
        )
        .await;
    browser.wait_text("#pending-count", &["2"]).await;
    browser.screenshot("approval-page").await;

    // Approve the transfer (its restart data is prefilled {"approved": true}).
    let prefilled = browser
        .client
        .find(Locator::Css(&format!("{card} textarea.resume-data")))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(&prefilled).unwrap(),
        json!({"approved": true})
    );
    browser.click(&format!("{card} button.approve")).await;
    browser
        .wait_text(&format!("{card} .notice"), &["Done", "Done: txn-123"])
        .await;
    browser
        .wait_text("#outcomes li.ok", &["transferMoney", "txn-123"])
        .await;
    // The audit row shows the approver.
    browser
        .wait_text("#decisions tbody tr[data-tool='transferMoney']", &["restart", "alice"])
        .await;
    let latest = f.store.get_latest_snapshot(&session).await.unwrap().unwrap();
    assert_eq!(latest.finish_reason, Some(holdpoint::FinishReason::Stop));
    assert_eq!(latest.state.unwrap().messages.last().unwrap().text(), "Done: txn-123");

    // Someone else answers the ops hold first; this page then says so plainly.
    browser.open(&s.url("/?poll=600000"), None).await;
    let ops_card = "li.card[data-tool='closeAccount']";
    browser.wait_text(ops_card, &["acct-42"]).await;
    let approve = restart(&paused_part(&ops), json!({"toolApproved": true}));
    let (code, _) = s
        .post(
            "/agents/opsAgent",
            json!({"data": {"resume": {"restart": [approve]}}, "init": {"snapshotId": ops["snapshotId"]}}),
            Some(ALICE_KEY),
        )
        .await;
    assert_eq!(code, 200);
    browser.click(&format!("{ops_card} button.approve")).await;
    browser
        .wait_text(&format!("{ops_card} .notice"), &["Already resumed elsewhere"])
        .await;
    assert_eq!(f.runs.load(Ordering::SeqCst), 1, "the tool ran once");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_with_a_reason_transcripts_audit_and_expired_holds() {
    let Some(browser) = Browser::start_or_skip("deny_with_a_reason_transcripts_audit_and_expired_holds").await else {
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
    browser.open(&server.url("/?poll=400"), None).await;
    let first = raise(&server, "opsAgent", "close acct-1", None).await;
    let card = format!("li.card[data-session='{}']", first["sessionId"].as_str().unwrap());
    browser
        .wait_text(&card, &["closeAccount", "acct-1", "Tool not in approved list"])
        .await;

    // Transcript and audit are one click away.
    browser.click(&format!("{card} button.transcript")).await;
    browser
        .wait_text("#detail", &["Transcript", "close acct-1", "closeAccount", "paused"])
        .await;
    browser.click("#detail-close").await;
    browser.click(&format!("{card} button.audit")).await;
    browser.wait_text("#detail", &["Audit", "No decisions recorded"]).await;
    browser.click("#detail-close").await;

    // Deny with a reason: the model hears it, the tool never runs, the audit keeps the reason.
    browser
        .type_into(&format!("{card} input.reason"), "too risky today")
        .await;
    browser.click(&format!("{card} button.deny")).await;
    browser.wait_text(&format!("{card} .notice"), &["Done", "denied"]).await;
    browser
        .wait_text(
            "#decisions tbody tr[data-decision='deny']",
            &["closeAccount", "too risky today", "anonymous"],
        )
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // An expired hold says so, and approving it is refused (nothing runs,
    // nothing is recorded).
    let late = raise(&server, "expiringOps", "close acct-2", None).await;
    let late_card = format!("li.card[data-session='{}']", late["sessionId"].as_str().unwrap());
    browser.wait_text(&late_card, &["acct-2"]).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    browser.wait_text(&late_card, &["expired", "approval expired"]).await;
    browser.click(&format!("{late_card} button.approve")).await;
    browser
        .wait_text(
            &format!("{late_card} .notice"),
            &["expired", "can no longer be approved"],
        )
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    browser.close().await;
}
