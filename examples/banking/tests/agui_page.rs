//! The AG-UI example page (`examples/agui-page`) in headless Chromium,
//! driven as a person would, against `banking serve` on the scripted model:
//! the page's own server (`serve.mjs`) serves it and the ESM build of the
//! official `@ag-ui/client`, and passes `/agents/…` on to `banking serve`,
//! so the page and the API share one origin.
//!
//! Needs chromium + chromedriver, node, and the page's packages
//! (`npm ci --prefix examples/agui-page`, which `.ci/run` does); without
//! them the tests skip with a note, unless `CI=true`, where they fail.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::BufRead;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "k-agui-page-0123456789abcdef";

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

fn page_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../agui-page")
}

/// What the tests need, or `None` (after saying what is missing) when
/// something is missing outside CI.
struct Tools {
    chromedriver: PathBuf,
    chromium: PathBuf,
    node: PathBuf,
}

fn tools_or_skip(test: &str) -> Option<Tools> {
    let installed = page_dir().join("node_modules/@ag-ui/client/package.json").is_file();
    let found = (
        which("chromedriver"),
        which("chromium").or_else(|| which("chromium-browser")),
        which("node").filter(|_| installed),
    );
    let (Some(chromedriver), Some(chromium), Some(node)) = found else {
        let missing = "chromium, chromium-driver (apt-get install -y chromium chromium-driver), node and the page's packages (npm ci --prefix examples/agui-page)";
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "{test}: {missing} are required in CI"
        );
        eprintln!("SKIPPED {test}: install {missing}");
        return None;
    };
    Some(Tools {
        chromedriver,
        chromium,
        node,
    })
}

/// A child process killed (and waited for) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `node serve.mjs --port 0 --api API`: the page's URL, read from the
/// first line it prints.
fn serve_page(node: &PathBuf, api: &str) -> (Killed, String) {
    let mut child = Command::new(node)
        .arg("serve.mjs")
        .args(["--port", "0", "--api", api])
        .current_dir(page_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("serve.mjs printed its URL").unwrap();
    std::thread::spawn(move || for _ in lines {});
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_owned();
    (Killed(child), url)
}

struct Browser {
    client: Client,
    _driver: Killed,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Browser {
    async fn start(tools: &Tools) -> Browser {
        let port = free_port();
        let driver = Killed(
            Command::new(&tools.chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
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
                "binary": tools.chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1000,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        Browser {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    /// Opens the page, waits for its module (and so the import map's
    /// packages) to load, and enters the API key.
    async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
        self.wait_js("return document.body.dataset.ready === 'true';").await;
        self.click("#settings summary").await;
        self.client
            .find(Locator::Css("#key"))
            .await
            .unwrap()
            .send_keys(KEY)
            .await
            .unwrap();
    }

    async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    async fn wait_js(&self, script: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.js(script).await == json!(true) {
                return;
            }
            let status = self.text("#status").await;
            assert!(
                Instant::now() < deadline,
                "not true within {WAIT:?}: {script} (status: {status:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn text(&self, css: &str) -> String {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
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
            let status = self.text("#status").await;
            assert!(
                Instant::now() < deadline,
                "no {css} with {parts:?} within {WAIT:?}; last text: {last:?}; status: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    async fn type_into(&self, css: &str, text: &str) {
        let input = self.client.find(Locator::Css(css)).await.unwrap();
        input.clear().await.unwrap();
        input.send_keys(text).await.unwrap();
    }

    /// Types a message and sends it, as a person does.
    async fn send(&self, text: &str) {
        self.wait_js("return !document.getElementById('send').disabled;").await;
        self.type_into("#message", text).await;
        self.click("#send").await;
    }

    /// The conversation's thread id: the Holdpoint session.
    async fn thread(&self) -> String {
        self.text("#thread").await
    }

    async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// The decisions `banking serve` recorded for `session`, oldest first.
async fn audit(base: &str, session: &str) -> Vec<Value> {
    let r = reqwest::Client::new()
        // The page's thread ids are UUIDs: nothing to escape.
        .get(format!("{base}/agents/bankingAgent/audit?sessionId={session}"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let body: Value = r.json().await.unwrap();
    let mut rows = body["result"].as_array().cloned().unwrap_or_else(|| panic!("{body:#}"));
    rows.sort_by_key(|r| r["at"].as_str().unwrap_or_default().to_owned());
    rows
}

/// Type "Transfer $500 to savings", see the interrupt with the tool and its
/// input, Approve: the transfer runs and the streamed answer says "Done".
#[tokio::test]
async fn the_page_asks_for_approval_and_approve_runs_the_transfer() {
    let Some(tools) = tools_or_skip("the_page_asks_for_approval_and_approve_runs_the_transfer") else {
        return;
    };
    let served = common::serve(&["--store", "memory:", "--model", "scripted", "--api-key", KEY]);
    let (_page, url) = serve_page(&tools.node, &served.base);
    let b = Browser::start(&tools).await;
    b.open(&url).await;

    b.send("Transfer $500 to savings").await;
    b.wait_text("#log .user", &["Transfer $500 to savings"]).await;
    // The run ends with the interrupt: its message, the tool and its input.
    b.wait_text(".interrupt .interrupt-message", &["Transfer $500.00 to savings"])
        .await;
    assert_eq!(b.text(".interrupt .interrupt-tool").await, "transferMoney");
    let input: Value = serde_json::from_str(&b.text(".interrupt .interrupt-input").await).unwrap();
    assert_eq!(input["amount"].as_f64(), Some(500.0), "{input}");
    assert_eq!(input["toAccount"], "savings", "{input}");
    b.wait_text("#status", &["Waiting for your answer"]).await;
    // The call was announced as it streamed, and no text came yet.
    b.wait_text("#log .tool", &["transferMoney", "500", "savings"]).await;
    assert_eq!(
        b.js("return document.querySelectorAll('#log .assistant').length;")
            .await,
        0
    );
    // New input waits until the interrupt is answered.
    assert_eq!(b.js("return document.getElementById('send').disabled;").await, true);
    // For a look at the page: the interrupt as a person sees it.
    let png = b.client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(std::env::temp_dir().join("holdpoint-agui-page.png"), &png).unwrap();
    let thread = b.thread().await;
    assert!(!thread.is_empty());
    assert!(audit(&served.base, &thread).await.is_empty(), "nothing decided yet");

    b.click(".interrupt .approve").await;
    let done = b.wait_text("#log .assistant", &["Done: txn-"]).await;
    assert_eq!(done, "Done: txn-123");
    b.wait_text("#log .result", &["txn-123"]).await;
    b.wait_text("#status", &["Done"]).await;
    // The text arrived in pieces, each shown as its event came.
    let deltas = b
        .js("return Number(document.querySelector('#log .assistant').dataset.deltas);")
        .await;
    assert!(deltas.as_u64().unwrap() >= 2, "{deltas}");
    assert_eq!(
        b.js("return document.getElementById('interrupts').hidden;").await,
        true,
        "the answered interrupt is gone"
    );
    // The server recorded one approval, on the page's thread.
    let rows = audit(&served.base, &thread).await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["decision"], "approve", "{rows:#?}");
    assert_eq!(rows[0]["tool"], "transferMoney", "{rows:#?}");
    b.close().await;
}

/// Edit amount: the edited amount is the one that runs. Then, on the same
/// thread, Cancel with a reason: nothing runs and the model is told the
/// transfer was declined, which its answer says.
#[tokio::test]
async fn edit_amount_runs_the_edited_transfer_and_cancel_tells_the_model_it_was_declined() {
    let Some(tools) = tools_or_skip("edit_amount_runs_the_edited_transfer_and_cancel_tells_the_model_it_was_declined")
    else {
        return;
    };
    let served = common::serve(&["--store", "memory:", "--model", "scripted", "--api-key", KEY]);
    let (_page, url) = serve_page(&tools.node, &served.base);
    let b = Browser::start(&tools).await;
    b.open(&url).await;
    let thread = b.thread().await;

    b.send("Transfer $500 to savings").await;
    b.wait_text(".interrupt .interrupt-message", &["Transfer $500.00 to savings"])
        .await;
    let form_shown = "return getComputedStyle(document.querySelector('.interrupt .edit-form')).display !== 'none';";
    assert_eq!(b.js(form_shown).await, false, "the amount field waits for Edit amount");
    b.click(".interrupt .edit").await;
    assert_eq!(b.js(form_shown).await, true);
    b.type_into(".interrupt .amount", "250").await;
    b.click(".interrupt .apply-edit").await;
    b.wait_text("#log .assistant", &["Done: txn-123"]).await;
    let rows = audit(&served.base, &thread).await;
    // The call ran with the edited input, the original kept beside it.
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["decision"], "edit", "{rows:#?}");
    assert_eq!(rows[0]["input"]["amount"].as_f64(), Some(250.0), "{rows:#?}");
    assert_eq!(rows[0]["input"]["toAccount"], "savings", "{rows:#?}");
    assert_eq!(rows[0]["originalInput"]["amount"].as_f64(), Some(500.0), "{rows:#?}");

    b.send("Transfer $75 to checking").await;
    b.wait_text(".interrupt .interrupt-message", &["Transfer $75.00 to checking"])
        .await;
    b.type_into(".interrupt .reason", "not today").await;
    b.click(".interrupt .cancel").await;
    let said = b.wait_text("#log .assistant", &["not made", "not today"]).await;
    assert_eq!(
        said,
        "The transfer was not made (the account holder declined the transfer: not today)."
    );
    b.wait_text("#log .result", &["declined", "not today"]).await;
    b.wait_text("#status", &["Done"]).await;
    let rows = audit(&served.base, &thread).await;
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[1]["decision"], "deny", "{rows:#?}");
    // Only the first transfer ran: one transaction on the page.
    assert_eq!(
        b.js("return [...document.querySelectorAll('#log .assistant')].filter(e => e.textContent.includes('txn-')).length;")
            .await,
        1
    );
    b.close().await;
}
