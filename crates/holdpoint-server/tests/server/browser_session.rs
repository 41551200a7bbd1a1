//! The page's sign-in that lasts (issue 34 item 4) in headless Chromium:
//! a key typed once signs in every tab through the server's HttpOnly
//! session cookie, no script-readable storage holds it, and Sign out
//! returns every tab to the sign-in. Also prints the "first hold on
//! screen" time with 300 holds (measured, not asserted; BENCHMARKS.md).
//! Skipped with a loud note when chromedriver is missing, unless `CI=true`.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use holdpoint_server::Server;
use serde_json::json;

use crate::page::Page;
use crate::support::{TestServer, memory, user};

/// A visible row of the queue.
const ROW: &str = "#queue li.item:not([hidden])";

impl Page {
    /// Everything script in the page can read of its storage and cookies.
    async fn readable_storage(&self) -> String {
        self.js(
            "return JSON.stringify({local: Object.entries(localStorage), session: Object.entries(sessionStorage), cookie: document.cookie});",
        )
        .await
        .as_str()
        .unwrap()
        .to_owned()
    }

    /// Milliseconds from the navigation to `url` until the first row of
    /// the queue is on screen (the page's own clock, `performance.now()`,
    /// checked every animation frame).
    async fn first_row_ms(&self, url: &str) -> f64 {
        self.client.goto(url).await.unwrap();
        let got = self
            .client
            .execute_async(
                "const row = arguments[0];
                 const done = arguments[arguments.length - 1];
                 (function check() {
                   const li = document.querySelector(row);
                   if (li && li.getBoundingClientRect().height > 0) done(performance.now());
                   else requestAnimationFrame(check);
                 })();",
                vec![json!(ROW)],
            )
            .await;
        got.ok().and_then(|v| v.as_f64()).unwrap_or(f64::NAN)
    }

    /// What the page fetched over `seconds` of refreshes, by the browser's
    /// Resource Timing: `[requests to /inbox, bytes over the wire (headers
    /// included), body bytes decoded]` for everything it asked the server.
    /// Counting starts after one refresh (3 s), so a list just grown by
    /// Load more has been fetched once at its new size.
    async fn fetched_over(&self, seconds: u64) -> (u64, u64, u64) {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        self.js("performance.clearResourceTimings(); return true;").await;
        tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
        let got = self
            .js("const all = performance.getEntriesByType('resource');
                 return [all.filter(e => new URL(e.name).pathname === '/inbox').length,
                         all.reduce((n, e) => n + e.transferSize, 0),
                         all.reduce((n, e) => n + e.decodedBodySize, 0)];")
            .await;
        let n = |i: usize| got[i].as_u64().unwrap_or(0);
        (n(0), n(1), n(2))
    }
}

const OLGA_KEY: &str = "k-olga-2b7e151628aed2a6";

/// `X-API-Key` / `Authorization: Bearer` `k-olga-…` is olga (finance);
/// other names are themselves, customers.
struct Keys;

#[async_trait::async_trait]
impl holdpoint_server::auth::ContextProvider for Keys {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<Option<holdpoint_server::auth::Identity>, holdpoint_server::auth::AuthError> {
        let header = |n: &str| request.headers.get(n).and_then(|v| v.to_str().ok());
        let Some(key) = header("x-api-key").or_else(|| header("authorization").and_then(|v| v.strip_prefix("Bearer ")))
        else {
            return Ok(None);
        };
        Ok(Some(if key == OLGA_KEY {
            holdpoint_server::auth::Identity::new("olga").with_roles(["finance"])
        } else {
            holdpoint_server::auth::Identity::new(key).with_roles(["customer"])
        }))
    }
}

async fn start_with_holds(holds: usize) -> TestServer {
    let paid = Arc::new(AtomicUsize::new(0));
    let server = Server::builder()
        .agent(crate::grants::payer(memory(), &paid))
        .provider(Arc::new(Keys))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    for i in 0..holds {
        let (code, body) = s
            .post(
                "/agents/payer",
                json!({"data": user(&(100 + i).to_string())}),
                Some("alice"),
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
        assert_eq!(body["result"]["finishReason"], "interrupted", "{body:#}");
    }
    s
}

#[tokio::test]
async fn a_key_signs_in_every_tab_without_storage_and_sign_out_ends_it() {
    let Some(page) = Page::start_or_skip("a_key_signs_in_every_tab_without_storage_and_sign_out_ends_it").await else {
        return;
    };
    let s = start_with_holds(1).await;
    let url = s.url("/?poll=300");
    page.client.goto(&url).await.unwrap();
    page.wait_text("#queue-status", &["Sign in"]).await;
    page.sign_in(OLGA_KEY).await;
    page.wait_text("#whoami", &["Signed in as olga", "finance"]).await;
    page.wait_text(ROW, &[]).await;

    // Script can read neither the key nor the cookie.
    let storage = page.readable_storage().await;
    assert!(!storage.contains(OLGA_KEY), "{storage}");
    assert!(!storage.contains("holdpoint_session"), "{storage}");
    let typed = page.js("return document.getElementById('token').value;").await;
    assert_eq!(typed, json!(""), "the field does not keep the key");

    // A second tab, opened without typing anything, is olga too.
    let first = page.client.window().await.unwrap();
    let second = page.client.new_window(true).await.unwrap();
    page.client.switch_to_window(second.handle).await.unwrap();
    page.client.goto(&url).await.unwrap();
    page.wait_text("#whoami", &["Signed in as olga"]).await;
    page.wait_text(ROW, &[]).await;
    let storage = page.readable_storage().await;
    assert!(!storage.contains(OLGA_KEY), "{storage}");

    // Sign out there: that tab asks for a sign-in …
    page.click("#sign-out").await;
    page.wait_text("#whoami", &["Not signed in."]).await;
    page.wait_text("#queue-status", &["Sign in"]).await;
    // … and so does the first one once it asks the server again.
    page.client.switch_to_window(first).await.unwrap();
    page.wait_text("#queue-status", &["Sign in"]).await;
    page.client.refresh().await.unwrap();
    page.wait_text("#queue-status", &["Sign in"]).await;
    assert_eq!(
        page.js("return document.querySelectorAll('#queue li.item').length;")
            .await,
        json!(0)
    );
    page.close().await;
}

/// Issue 34's page-load budget: navigation to the first hold on screen,
/// 300 holds waiting, signed in by the cookie. Printed, not asserted.
#[tokio::test]
async fn first_hold_on_screen_with_300_holds() {
    let Some(page) = Page::start_or_skip("first_hold_on_screen_with_300_holds").await else {
        return;
    };
    let s = start_with_holds(300).await;
    let url = s.url("/");
    page.client.goto(&url).await.unwrap();
    page.sign_in(OLGA_KEY).await;
    page.wait_text("#queue-status", &["300"]).await;
    let mut samples = Vec::new();
    for _ in 0..5 {
        samples.push(page.first_row_ms(&url).await);
    }
    assert!(samples.iter().all(|ms| ms.is_finite()), "{samples:?}");
    samples.sort_by(f64::total_cmp);
    eprintln!(
        "first hold on screen, 300 holds: median {:.0} ms (samples {:?} ms)",
        samples[samples.len() / 2],
        samples.iter().map(|m| m.round()).collect::<Vec<_>>()
    );
    page.close().await;
}

/// Whether the list's "Load more" is offered (a JS expression).
const MORE: &str = "(() => { const b = document.getElementById('load-more'); return !!b && !b.hidden; })()";

/// Issue 34 item 9's budget: what each 2 s refresh of the list costs with
/// 300 holds waiting, with the first page shown and with all 300 loaded
/// (Load more until none is left). Printed, not asserted (BENCHMARKS.md).
#[tokio::test]
async fn bytes_per_refresh_with_300_holds() {
    let Some(page) = Page::start_or_skip("bytes_per_refresh_with_300_holds").await else {
        return;
    };
    let s = start_with_holds(300).await;
    page.client.goto(&s.url("/")).await.unwrap();
    page.sign_in(OLGA_KEY).await;
    page.wait_text("#queue-status", &["300"]).await;
    page.wait_text(ROW, &[]).await;
    let loaded = || page.js("return document.querySelectorAll('#queue li.item').length;");
    let first = loaded().await;
    let (polls, wire, body) = page.fetched_over(10).await;
    eprintln!(
        "bytes per refresh, 300 holds, {first} loaded: {polls} refreshes in 10 s, {} B over the wire, {} B of bodies per refresh",
        wire / polls.max(1),
        body / polls.max(1)
    );
    while page.js(&format!("return {MORE};")).await == json!(true) {
        let before = loaded().await.as_u64().unwrap_or(0);
        page.click("#load-more").await;
        page.wait_js(&format!(
            "return document.querySelectorAll('#queue li.item').length > {before} || !{MORE};"
        ))
        .await;
    }
    let all = loaded().await;
    let (polls, wire, body) = page.fetched_over(10).await;
    eprintln!(
        "bytes per refresh, 300 holds, {all} loaded: {polls} refreshes in 10 s, {} B over the wire, {} B of bodies per refresh",
        wire / polls.max(1),
        body / polls.max(1)
    );
    assert!(polls > 0, "the page refreshed");
    page.close().await;
}
