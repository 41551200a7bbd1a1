//! The cluster's parts: a private PostgreSQL (scripts/postgres.sh), the
//! `banking serve` replicas, the round-robin proxy and the webhook
//! receiver, all on 127.0.0.1.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

use crate::Error;

/// A private PostgreSQL server started by `scripts/postgres.sh`.
pub struct Postgres {
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
    dir: PathBuf,
    script: PathBuf,
}

impl Postgres {
    /// Starts one (installing Debian's package if needed).
    pub fn start(script: &Path) -> Result<Postgres, Error> {
        let out = std::process::Command::new("bash")
            .arg(script)
            .arg("start")
            .stderr(Stdio::inherit())
            .output()?;
        if !out.status.success() {
            return Err(Error::Setup(format!("{} start failed", script.display())));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let get = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .map(str::to_owned)
                .ok_or_else(|| Error::Setup(format!("postgres.sh printed no {name}")))
        };
        Ok(Postgres {
            url: get("DATABASE_URL")?,
            dir: PathBuf::from(get("HOLDPOINT_PG_DIR")?),
            script: script.to_owned(),
        })
    }

    /// Makes every later connection commit synchronously: a commit returns
    /// once its WAL is written, so an immediate restart (a crash of the
    /// server's processes) loses no committed transaction. The throwaway
    /// server of `scripts/postgres.sh` runs with `synchronous_commit=off`
    /// on its command line, which a role setting overrides.
    pub async fn durable_commits(&self) -> Result<(), Error> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url).await?;
        sqlx::query("ALTER ROLE postgres SET synchronous_commit = on")
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        let mut conn = sqlx::PgConnection::connect(&self.url).await?;
        let now: String = sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(&mut conn)
            .await?;
        conn.close().await?;
        if now != "on" {
            return Err(Error::Setup(format!("synchronous_commit is {now} after ALTER ROLE")));
        }
        Ok(())
    }

    /// `pg_ctl restart -m immediate` (as the postgres user when root): the
    /// server crashes on purpose and recovers from its WAL.
    pub fn restart_immediate(&self) -> Result<(), Error> {
        let bin = std::process::Command::new("bash")
            .arg("-c")
            .arg("ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1")
            .output()?;
        let bin = String::from_utf8_lossy(&bin.stdout).trim().to_owned();
        let data = self.dir.join("data");
        let pg_ctl = format!("{bin}/pg_ctl");
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", &pg_ctl]);
            c
        } else {
            std::process::Command::new(&pg_ctl)
        };
        let status = cmd
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "-t", "60", "restart"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(Error::Setup("pg_ctl restart -m immediate failed".into()));
        }
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .env("HOLDPOINT_PG_DIR", &self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A free loopback port (bound, then released).
pub fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One `banking serve` replica: its fixed port, and its process while it runs.
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Option<Child>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    binary: PathBuf,
    log: PathBuf,
}

impl Replica {
    /// A replica not yet started.
    pub fn new(
        binary: &Path,
        addr: SocketAddr,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Replica {
        Replica {
            addr,
            child: None,
            args,
            env,
            binary: binary.to_owned(),
            log,
        }
    }

    /// Whether its process runs.
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the process and waits until `/healthz` answers.
    pub async fn start(&mut self, http: &reqwest::Client) -> Result<(), Error> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("GEMINI_API_KEY")
            .env_remove("GOOGLE_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        let url = format!("http://{}/healthz", self.addr);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                return Err(Error::Setup(format!(
                    "replica {} exited ({status}); see {}",
                    self.addr,
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Setup(format!("replica {} did not become healthy", self.addr)))
    }

    /// SIGKILL to this replica's own process (its pid, never a group), and
    /// reaps it.
    pub async fn kill(&mut self) -> Result<(), Error> {
        if let Some(mut child) = self.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }
}

/// A round-robin TCP proxy on loopback: each accepted connection goes to
/// the next replica that accepts a connection.
pub async fn start_proxy(backends: Vec<SocketAddr>) -> Result<SocketAddr, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let next = Arc::new(AtomicUsize::new(0));
    let backends = Arc::new(backends);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let (next, backends) = (Arc::clone(&next), Arc::clone(&backends));
            tokio::spawn(async move {
                let start = next.fetch_add(1, Ordering::Relaxed);
                for i in 0..backends.len() {
                    let backend = backends[(start + i) % backends.len()];
                    let connect = tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(backend)).await;
                    if let Ok(Ok(mut outbound)) = connect {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// What the webhook receiver saw, by `webhook-id`.
#[derive(Default)]
pub struct Hooks {
    /// id → (deliveries accepted or refused, the event's type and data as first seen, whether a
    /// later delivery carried something else).
    pub seen: HashMap<String, HookRecord>,
    /// Requests without a `webhook-id`.
    pub without_id: usize,
    counter: u64,
}

/// One webhook id's deliveries.
pub struct HookRecord {
    /// Requests with this id (including refused ones).
    pub requests: usize,
    /// Requests answered 2xx.
    pub accepted: usize,
    /// The event's type.
    pub kind: String,
    /// `type` and `data` of the first delivery.
    pub first: Value,
    /// A later delivery with the same id carried another type or data.
    pub changed: bool,
}

/// Starts the Standard Webhooks receiver at `http://ADDR/hook`; it refuses
/// every seventh request with 503, so some events are delivered again
/// under the same id.
pub async fn start_hooks() -> Result<(SocketAddr, Arc<Mutex<Hooks>>), Error> {
    use axum::http::{HeaderMap, StatusCode};
    let hooks = Arc::new(Mutex::new(Hooks::default()));
    let state = Arc::clone(&hooks);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let state = Arc::clone(&state);
            async move {
                let Ok(mut h) = state.lock() else {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                };
                let Some(id) = headers.get("webhook-id").and_then(|v| v.to_str().ok()) else {
                    h.without_id += 1;
                    return StatusCode::BAD_REQUEST;
                };
                let id = id.to_owned();
                h.counter += 1;
                let refuse = h.counter.is_multiple_of(7);
                let event: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let payload = serde_json::json!({"type": event["type"], "data": event["data"]});
                let kind = event["type"].as_str().unwrap_or("").to_owned();
                let rec = h.seen.entry(id).or_insert_with(|| HookRecord {
                    requests: 0,
                    accepted: 0,
                    kind,
                    first: payload.clone(),
                    changed: false,
                });
                rec.requests += 1;
                if rec.first != payload {
                    rec.changed = true;
                }
                if refuse {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    rec.accepted += 1;
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((addr, hooks))
}
