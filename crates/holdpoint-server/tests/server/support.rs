//! A server on a loopback port, a small HTTP client, and the agents the
//! tests serve.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint::agent::{Agent, Turn};
use holdpoint::message::{PartKind, Role};
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{AuditQuery, InMemoryStore, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus};
use holdpoint::tool::tool;
use holdpoint::{ScriptedModel, ScriptedTurn, ToolContext};
use holdpoint_server::auth::{AgentScope, ApiKeys, JwtVerifier};
use holdpoint_server::{Server, ServerBuilder};
use reqwest::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub const ALICE_KEY: &str = "k-alice-0123456789abcdef";
pub const ALICE_APPROVER_KEY: &str = "k-alice-approver-0123456789";
pub const BOB_KEY: &str = "k-bob-0123456789abcdef";
pub const OPS_KEY: &str = "k-ops-0123456789abcdef";
pub const JWT_SECRET: &[u8] = b"jwt-secret-for-tests-0123456789abcdef";

/// A running server.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start(server: Server) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let s = server.clone();
        let task = tokio::spawn(async move {
            holdpoint_server::serve(listener, &s, async move {
                let _ = stopped.await;
            })
            .await
        });
        TestServer {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }

    pub fn stop_signal(&mut self) -> oneshot::Sender<()> {
        self.stop.take().unwrap()
    }

    pub fn take_task(&mut self) -> tokio::task::JoinHandle<std::io::Result<()>> {
        self.task.take().unwrap()
    }

    pub async fn post(&self, path: &str, body: Value, key: Option<&str>) -> (StatusCode, Value) {
        let mut req = self.client.post(self.url(path)).json(&body);
        if let Some(key) = key {
            req = req.header("x-api-key", key);
        }
        read(req.send().await.unwrap()).await
    }

    pub async fn post_raw(&self, path: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
        let req = self
            .client
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body);
        read(req.send().await.unwrap()).await
    }

    /// `GET /metrics` as text.
    pub async fn metrics(&self) -> String {
        let r = self.client.get(self.url("/metrics")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap()
    }

    pub async fn get(&self, path: &str, key: Option<&str>) -> (StatusCode, Value) {
        let mut req = self.client.get(self.url(path));
        if let Some(key) = key {
            req = req.header("x-api-key", key);
        }
        read(req.send().await.unwrap()).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn read(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}"));
    (status, value)
}

/// Asserts an `{"error": {status, message}}` body.
#[track_caller]
pub fn assert_error(got: &(StatusCode, Value), code: u16, status: &str, message_part: &str) {
    assert_eq!(got.0.as_u16(), code, "{:#}", got.1);
    assert_eq!(got.1["error"]["status"], json!(status), "{:#}", got.1);
    let message = got.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(message_part),
        "message {message:?} lacks {message_part:?}"
    );
    assert_eq!(got.1.as_object().unwrap().len(), 1, "only `error`: {:#}", got.1);
}

pub fn user(text: &str) -> Value {
    json!({"message": {"role": "user", "content": [{"text": text}]}})
}

/// The restart directive for a paused part, with resume data.
pub fn restart(part: &Value, resume: Value) -> Value {
    let req = &part["toolRequest"];
    json!({"toolRequest": req, "metadata": {"resumed": resume}})
}

/// The first paused part of an output.
pub fn paused_part(out: &Value) -> Value {
    out["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["interrupt"].is_object() || p["metadata"]["interrupt"] == json!(true))
        .cloned()
        .unwrap_or_else(|| panic!("no paused part in {out:#}"))
}

/// Everything a store holds, to compare before and after a rejected request.
pub async fn dump(store: &dyn SessionStore) -> (Vec<Snapshot>, usize) {
    let mut rows = store
        .capabilities()
        .listing()
        .unwrap()
        .list_snapshots(&SnapshotQuery {
            limit: Some(10_000),
            ..SnapshotQuery::default()
        })
        .await
        .unwrap();
    rows.sort_by(|a, b| a.snapshot_id.cmp(&b.snapshot_id));
    let audit = store
        .capabilities()
        .audit()
        .unwrap()
        .list_audit(&AuditQuery {
            limit: Some(10_000),
            ..AuditQuery::default()
        })
        .await
        .unwrap()
        .len();
    (rows, audit)
}

pub async fn wait_for_status(store: &dyn SessionStore, id: &str, want: SnapshotStatus) -> Snapshot {
    for _ in 0..500 {
        let s = store.get_snapshot(id).await.unwrap().unwrap();
        if s.status == want {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("snapshot {id} never became {want:?}");
}

// --- agents -----------------------------------------------------------

/// The banking agent on its offline model, sessions in `store`.
pub fn bank(store: Arc<dyn SessionStore>) -> Agent {
    crate::bank::builder("bankingAgent").store(store).build().unwrap()
}

/// The banking agent without a store: client-held state.
pub fn bank_client_managed() -> Agent {
    bank_client_managed_named("bankingAgent")
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Account {
    pub account: String,
}

/// An ops agent whose `closeAccount` calls are held by ToolApproval; it
/// counts how often the tool really ran.
pub fn ops(store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>) -> Agent {
    ops_named("opsAgent", store, runs, None)
}

/// [`ops`] under another name, its holds expiring after `ttl`.
pub fn ops_named(name: &str, store: Arc<dyn SessionStore>, runs: Arc<AtomicUsize>, ttl: Option<Duration>) -> Agent {
    ops_with(name, store, runs, ttl, None)
}

/// [`ops_named`] with an extra middleware outside the approval gate.
pub fn ops_with(
    name: &str,
    store: Arc<dyn SessionStore>,
    runs: Arc<AtomicUsize>,
    ttl: Option<Duration>,
    outer: Option<Arc<dyn holdpoint::middleware::Middleware>>,
) -> Agent {
    ops_builder(name, runs, ttl, outer).store(store).build().unwrap()
}

/// The ops agent without a store: client-held (signed) state.
pub fn ops_client_managed(name: &str, runs: Arc<AtomicUsize>) -> Agent {
    ops_builder(name, runs, None, None).build().unwrap()
}

fn ops_builder(
    name: &str,
    runs: Arc<AtomicUsize>,
    ttl: Option<Duration>,
    outer: Option<Arc<dyn holdpoint::middleware::Middleware>>,
) -> holdpoint::agent::AgentBuilder {
    let close = tool(
        "closeAccount",
        "Closes an account",
        move |_ctx: ToolContext, a: Account| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let model = ScriptedModel::from_fn("scripted/ops", |request, _| {
        let last = request.messages.last()?;
        if last.role == Role::Tool {
            let said = last
                .content
                .iter()
                .filter_map(|p| match &p.kind {
                    PartKind::ToolResponse(r) => Some(r.output.clone().unwrap_or(Value::Null).to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            return Some(ScriptedTurn::text(format!("ops result: {said}")));
        }
        let text = last.text();
        match text.strip_prefix("close ") {
            Some(account) => Some(ScriptedTurn::tool_call("closeAccount", json!({"account": account}))),
            None => Some(ScriptedTurn::text("say: close ACCOUNT")),
        }
    });
    let mut gate = ToolApproval::allow(Vec::<String>::new());
    if let Some(ttl) = ttl {
        gate = gate.ttl(ttl);
    }
    let mut builder = Agent::builder(name)
        .description("Closes accounts after a person approves")
        .model(Arc::new(model))
        .tool(close);
    if let Some(outer) = outer {
        builder = builder.middleware(outer);
    }
    builder.middleware(gate.into_middleware())
}

/// A custom agent whose turns take `delay`.
pub fn slow(store: Arc<dyn SessionStore>, delay: Duration) -> Agent {
    Agent::custom("slowAgent", move |turn: Turn| async move {
        tokio::time::sleep(delay).await;
        turn.reply_text("finally");
        Ok(())
    })
    .store(store)
    .build()
    .unwrap()
}

pub fn memory() -> Arc<InMemoryStore> {
    Arc::new(InMemoryStore::new())
}

pub fn jwt() -> JwtVerifier {
    JwtVerifier::hs256(JWT_SECRET).unwrap()
}

pub fn token(sub: &str) -> String {
    jwt()
        .issue(&json!({"sub": sub, "exp": chrono::Utc::now().timestamp() + 3600}))
        .unwrap()
}

/// API keys for alice (two), bob, and ops (only `opsAgent`); JWTs.
pub fn with_auth(builder: ServerBuilder) -> ServerBuilder {
    builder
        .api_keys(
            ApiKeys::new()
                .key(ALICE_KEY, "alice")
                .key(ALICE_APPROVER_KEY, "alice")
                .key(BOB_KEY, "bob")
                .scoped_key(OPS_KEY, "ops", AgentScope::only(["opsAgent"])),
        )
        .jwt(jwt())
}

/// A server with the bank and ops agents on one in-memory store.
pub struct Fixture {
    pub store: Arc<InMemoryStore>,
    pub runs: Arc<AtomicUsize>,
    pub server: TestServer,
}

pub async fn fixture(auth: bool) -> Fixture {
    let store = memory();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut builder = Server::builder()
        .agent(bank(store.clone()))
        .agent(ops(store.clone(), runs.clone()))
        .agent(bank_client_managed_named("clientBank"))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap());
    if auth {
        builder = with_auth(builder);
    }
    Fixture {
        store,
        runs,
        server: TestServer::start(builder.build().unwrap()).await,
    }
}

/// The client-managed banking agent under another name.
pub fn bank_client_managed_named(name: &str) -> Agent {
    crate::bank::builder(name).build().unwrap()
}

/// The value of the sample `name` whose labels include `labels` (summed
/// over the matching series), from Prometheus text.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            (n == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}
