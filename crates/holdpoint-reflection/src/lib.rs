//! Genkit's reflection API, so the Genkit CLI and Developer UI
//! (`genkit start -- cargo run -p banking -- serve`) find the served agents
//! as a runtime, list them with their tools and models, run and stream
//! their turns, and show their traces (docs/reference.md §18).
//!
//! v1 is an HTTP server of the runtime's own:
//!
//! | route | what |
//! |---|---|
//! | `GET /api/__health` | `OK`; 503 when `?id=` names another runtime |
//! | `GET /api/actions` | `/agent/{name}`, `/agent-snapshot/{name}`, `/agent-abort/{name}`, `/tool/{name}`, `/model/{name}` with Genkit's metadata |
//! | `POST /api/runAction` | `{key, input, init?}` → `{result, telemetry: {traceId}}`; NDJSON chunks first with `?stream=true` |
//! | `POST /api/notify` | `{telemetryServerUrl, reflectionApiSpecVersion}`: where traces go |
//! | `POST /api/cancelAction` | `{traceId}` cancels a running action; 404 when none runs |
//! | `GET /api/envs` | `["dev"]` |
//!
//! v2 (when `GENKIT_REFLECTION_V2_SERVER` is set) is a WebSocket client of
//! the CLI speaking JSON-RPC, with bidirectional runs (the CLI's
//! `sendBidiInput`); see the `v2` module.
//!
//! The reflection server is a development tool: it runs only when
//! `GENKIT_ENV=dev` ([`Reflection::from_env`]), listens on `127.0.0.1`
//! only, and runs actions with no principal (the developer's own sessions;
//! it reads and aborts any snapshot of the agents it serves). So v1 answers
//! only the CLI on this machine: loopback `Host` and `Origin` (else 421 and
//! 403, the main server's check), JSON `POST` bodies (else 415), loopback
//! trace targets (else 400); see the `guard` module. A `/tool/{name}` run
//! goes through the approval gate of the agent it is listed from
//! ([`Agent::call_tool`]): a call a rule or ToolApproval would hold comes
//! back as its interrupt, the tool not run. v1 writes its
//! runtime file into `<project root>/.genkit/runtimes/`, the project root
//! found by the CLI's rule ([`project_root`]), and removes it when the
//! [`ReflectionHandle`] is dropped.

mod actions;
mod guard;
mod routes;
mod run;
mod runtime;
mod trace;
mod v2;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use holdpoint::agent::{Agent, Connection};

pub use runtime::project_root;

/// The reflection API spec version this server speaks (Genkit's
/// `GENKIT_REFLECTION_API_SPEC_VERSION`).
pub const REFLECTION_API_SPEC_VERSION: u32 = 1;

/// What starting the reflection server can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectionError {
    /// The loopback port could not be bound.
    #[error("cannot listen for the Genkit reflection API on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for (0: any).
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime file could not be written.
    #[error("cannot write the Genkit runtime file {path}: {source}")]
    RuntimeFile {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CLI's reflection v2 server could not be reached.
    #[error("cannot connect to the Genkit reflection v2 server {url}: {reason}")]
    Connect {
        /// The `ws://` address.
        url: String,
        /// Why.
        reason: String,
    },
}

/// The reflection server's settings. Off unless built by
/// [`from_env`](Self::from_env) in dev mode or by [`new`](Self::new).
#[derive(Debug, Clone)]
pub struct Reflection {
    port: u16,
    root: Option<PathBuf>,
    telemetry: Option<String>,
    runtime_id: Option<String>,
    v2_server: Option<String>,
}

impl Default for Reflection {
    fn default() -> Self {
        Self::new()
    }
}

impl Reflection {
    /// A reflection server on a free loopback port, the project root found
    /// from the working directory, no telemetry server until notified.
    pub fn new() -> Self {
        Reflection {
            port: 0,
            root: None,
            telemetry: None,
            runtime_id: None,
            v2_server: None,
        }
    }

    /// The reflection server Genkit's CLI asks for: `Some` only when
    /// `GENKIT_ENV=dev` (what `genkit start` sets), with its telemetry
    /// server (`GENKIT_TELEMETRY_SERVER`), runtime id (`GENKIT_RUNTIME_ID`),
    /// port (`GENKIT_REFLECTION_PORT`, else any free one) and, when
    /// `GENKIT_REFLECTION_V2_SERVER` names the CLI's WebSocket server, v2
    /// instead of v1 (as Genkit's runtimes choose).
    pub fn from_env() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if var("GENKIT_ENV").as_deref() != Some("dev") {
            return None;
        }
        let mut r = Reflection::new();
        r.telemetry = var("GENKIT_TELEMETRY_SERVER");
        r.runtime_id = var("GENKIT_RUNTIME_ID");
        r.port = var("GENKIT_REFLECTION_PORT").and_then(|p| p.parse().ok()).unwrap_or(0);
        r.v2_server = var("GENKIT_REFLECTION_V2_SERVER");
        Some(r)
    }

    /// Listens on this loopback port (0: any free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Writes the runtime file under `dir/.genkit/runtimes` instead of the
    /// project root found from the working directory.
    pub fn project_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.root = Some(dir.into());
        self
    }

    /// Speaks reflection API v2: connects to the CLI's WebSocket server at
    /// `url` (`ws://host:port`) instead of serving HTTP; no port is bound
    /// and no runtime file written.
    pub fn v2_server(mut self, url: impl Into<String>) -> Self {
        self.v2_server = Some(url.into());
        self
    }

    /// Sends traces to this Genkit telemetry server (`http://host:port`).
    pub fn telemetry_server(mut self, url: impl Into<String>) -> Self {
        self.telemetry = Some(url.into());
        self
    }

    /// The router of the reflection API over `agents` (for tests and for
    /// serving it yourself; [`start`](Self::start) binds and announces it).
    pub fn router(&self, agents: BTreeMap<String, Agent>, runtime_id: impl Into<String>) -> Router {
        routes::router(self.shared(agents, runtime_id.into()))
    }

    fn shared(&self, agents: BTreeMap<String, Agent>, runtime_id: String) -> Shared {
        Shared(Arc::new(Inner {
            agents,
            runtime_id,
            telemetry: Mutex::new(self.telemetry.clone()),
            pinned_telemetry: self.telemetry.is_some(),
            running: Mutex::new(HashMap::new()),
            http: trace::http_client(),
        }))
    }

    /// Binds `127.0.0.1`, serves the reflection API over `agents` in a task
    /// of its own, and writes the runtime file the CLI watches for. With a
    /// [v2 server](Self::v2_server): connects to it, registers, and
    /// answers it in a task of its own (reconnecting when it drops).
    pub async fn start(self, agents: BTreeMap<String, Agent>) -> Result<ReflectionHandle, ReflectionError> {
        if let Some(url) = self.v2_server.clone() {
            let ws = v2::connect(&url).await.map_err(|reason| ReflectionError::Connect {
                url: url.clone(),
                reason,
            })?;
            let pid = std::process::id();
            let runtime_id = self.runtime_id.clone().unwrap_or_else(|| pid.to_string());
            let shared = self.shared(agents, runtime_id);
            let task = tokio::spawn(v2::session(shared, url.clone(), ws));
            return Ok(ReflectionHandle {
                addr: None,
                runtime_file: None,
                v2_server: Some(url),
                task,
            });
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| ReflectionError::Bind {
                port: self.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ReflectionError::Bind {
            port: self.port,
            source,
        })?;
        let pid = std::process::id();
        let runtime_id = self
            .runtime_id
            .clone()
            .unwrap_or_else(|| format!("{pid}-{}", addr.port()));
        let app = self.router(agents, runtime_id.clone());
        let root = match &self.root {
            Some(dir) => dir.clone(),
            None => project_root(),
        };
        let file = runtime::write(&root, &runtime_id, addr)
            .map_err(|(path, source)| ReflectionError::RuntimeFile { path, source })?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ReflectionHandle {
            addr: Some(addr),
            runtime_file: Some(file),
            v2_server: None,
            task,
        })
    }
}

/// Starts the reflection server over `server`'s agents when `GENKIT_ENV=dev`
/// (as under `genkit start`), saying where on stderr; `None` otherwise, and
/// when it cannot start (the reason is printed, the server goes on).
/// Keep the handle for as long as the server runs.
pub async fn start_if_dev(server: &holdpoint_server::Server) -> Option<ReflectionHandle> {
    let reflection = Reflection::from_env()?;
    match reflection.start(server.state().agents().clone()).await {
        Ok(handle) => {
            match (handle.addr(), handle.v2_server()) {
                (Some(addr), _) => eprintln!("Genkit reflection API: http://{addr} (GENKIT_ENV=dev)"),
                (None, Some(url)) => eprintln!("Genkit reflection API v2: connected to {url} (GENKIT_ENV=dev)"),
                (None, None) => {}
            }
            Some(handle)
        }
        Err(e) => {
            eprintln!("Genkit reflection API not started: {e}");
            None
        }
    }
}

/// A running reflection server (v1) or connection (v2). Dropping it stops
/// it and removes its runtime file.
#[derive(Debug)]
pub struct ReflectionHandle {
    addr: Option<SocketAddr>,
    runtime_file: Option<PathBuf>,
    v2_server: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl ReflectionHandle {
    /// Where it listens (v1; `None` for v2).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The runtime file it wrote (v1; `None` for v2).
    pub fn runtime_file(&self) -> Option<&std::path::Path> {
        self.runtime_file.as_deref()
    }

    /// The CLI's WebSocket server it is connected to (v2).
    pub fn v2_server(&self) -> Option<&str> {
        self.v2_server.as_deref()
    }
}

impl Drop for ReflectionHandle {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(file) = &self.runtime_file {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// State shared by the routes.
#[derive(Clone)]
pub(crate) struct Shared(Arc<Inner>);

pub(crate) struct Inner {
    agents: BTreeMap<String, Agent>,
    runtime_id: String,
    /// Where traces go; `None` until configured or notified.
    telemetry: Mutex<Option<String>>,
    /// A telemetry server from the environment wins over `/api/notify`
    /// (as in Genkit).
    pinned_telemetry: bool,
    /// The running actions by trace id, for `/api/cancelAction`.
    running: Mutex<HashMap<String, Cancel>>,
    http: trace::Http,
}

impl std::ops::Deref for Shared {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Inner {
    fn telemetry(&self) -> Option<String> {
        self.telemetry.lock().ok().and_then(|t| t.clone())
    }

    /// Points traces at `url`, unless a telemetry server from the
    /// environment is pinned, or `url` is not an `http://` URL on a
    /// loopback host: traces carry every tool's input and output, so they
    /// never leave the machine on a caller's word (`/api/notify` refuses
    /// such a URL with 400 before calling this; v2's CLI is only warned
    /// about).
    fn set_telemetry(&self, url: String) {
        if self.pinned_telemetry {
            return;
        }
        if let Err(why) = guard::check_telemetry_url(&url) {
            tracing::warn!(%why, "reflection: telemetry server not changed");
            return;
        }
        if let Ok(mut t) = self.telemetry.lock() {
            *t = Some(url);
        }
    }

    fn track(&self, trace_id: &str, cancel: Cancel) {
        if let Ok(mut running) = self.running.lock() {
            running.insert(trace_id.to_owned(), cancel);
        }
    }

    /// Stops tracking a run; `None` when it was cancelled (or never ran).
    fn untrack(&self, trace_id: &str) -> Option<Cancel> {
        self.running.lock().ok().and_then(|mut r| r.remove(trace_id))
    }
}

/// How a running action is stopped.
pub(crate) enum Cancel {
    /// An agent's turn: its connection.
    Conn(Arc<Connection>),
    /// A tool or model call running in a task of its own.
    Task(tokio::task::AbortHandle),
}

impl Cancel {
    fn cancel(&self) {
        match self {
            Cancel::Conn(conn) => conn.cancel(),
            Cancel::Task(task) => task.abort(),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod v2_tests;

#[cfg(test)]
mod guard_tests;
