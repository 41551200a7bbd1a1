//! The approval page in headless Chromium over WebDriver, as the browser
//! suites of issue 34 drive it (`browser_inbox`, `browser_triage`,
//! `browser_grants`, `browser_session`): one chromedriver and one
//! throw-away profile per [`Page`], and the steps a person takes. A suite
//! adds its own steps in an `impl Page` block of its own.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long a step waits for the page.
pub const WAIT: Duration = Duration::from_secs(20);

/// A headless Chromium driven over WebDriver; chromedriver is killed when
/// it is dropped.
pub struct Page {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

impl Page {
    pub async fn start_or_skip(test: &str) -> Option<Page> {
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
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
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
                    "--disable-dev-shm-usage", "--window-size=1366,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        Some(Page {
            client,
            driver,
            _profile: profile,
        })
    }

    /// Opens `url`, signing in with `credential` as a person types it.
    pub async fn open(&self, url: &str, credential: Option<&str>) {
        self.client.goto(url).await.unwrap();
        if let Some(credential) = credential {
            self.sign_in(credential).await;
        }
    }

    /// Types `credential` into the sign-in field and presses Use.
    pub async fn sign_in(&self, credential: &str) {
        let input = self.client.find(Locator::Css("#token")).await.unwrap();
        input.clear().await.unwrap();
        input.send_keys(credential).await.unwrap();
        self.click("#use-token").await;
    }

    /// Waits until an element matching `css` has text containing every one
    /// of `parts`; returns its text.
    pub async fn wait_text(&self, css: &str, parts: &[&str]) -> String {
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

    /// The visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.client.find(Locator::Css(css)).await.unwrap().text().await.unwrap()
    }

    pub async fn click(&self, css: &str) {
        let e = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        e.click().await.unwrap();
    }

    /// Clicks the button named `name` (its text) inside `scope` (XPath).
    pub async fn press(&self, scope: &str, name: &str) {
        self.button(scope, name).await.click().await.unwrap();
    }

    /// The button named `name` (its text) inside `scope` (XPath), once shown.
    pub async fn button(&self, scope: &str, name: &str) -> fantoccini::elements::Element {
        let xpath = format!("{scope}//button[normalize-space(.)='{name}']");
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no button named {name:?}: {e}"))
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Waits until `script` returns `true`.
    pub async fn wait_js(&self, script: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.js(script).await == json!(true) {
                return;
            }
            assert!(Instant::now() < deadline, "not true within {WAIT:?}: {script}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Ends the WebDriver session (chromedriver goes when dropped).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}
