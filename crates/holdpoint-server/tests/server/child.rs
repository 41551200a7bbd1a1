//! Server processes for the tests that need real processes (SIGTERM, two
//! replicas): the test binary runs itself with `HOLDPOINT_SERVER_CHILD`
//! set, and [`child_process_entry`] then serves until SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use holdpoint::session::SessionStore;
use holdpoint_server::Server;
use holdpoint_server::signing::{KeyRing, SigningKey};

use crate::support::*;

const ROLE: &str = "HOLDPOINT_SERVER_CHILD";
const STORE_URL: &str = "HOLDPOINT_SERVER_CHILD_STORE";

/// A server process; killed when dropped.
pub struct ChildServer {
    pub child: Child,
    pub base: String,
}

impl ChildServer {
    /// Starts `role` (`slow` or `replica`) with an optional store URL.
    pub fn start(role: &str, store_url: Option<&str>) -> ChildServer {
        Self::start_with(role, store_url, &[])
    }

    /// [`start`](Self::start) with extra environment variables.
    pub fn start_with(role: &str, store_url: Option<&str>, env: &[(&str, &str)]) -> ChildServer {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new(exe);
        cmd.args([
            "--exact",
            "child::child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        if let Some(url) = store_url {
            cmd.env(STORE_URL, url);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest prints "test NAME ... " on the same line first.
                if let Some(at) = line.find("LISTENING ") {
                    let addr = line[at + "LISTENING ".len()..].trim().to_owned();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the child server reports its address");
        ChildServer {
            child,
            base: format!("http://{addr}"),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit (at most `timeout`); its exit code.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One signing key shared by every replica, as a deployment would share it.
fn shared_keys() -> KeyRing {
    KeyRing::new(vec![SigningKey::new("replicas", vec![42; 32]).unwrap()]).unwrap()
}

async fn open_store(url: &str) -> Arc<dyn SessionStore> {
    crate::replicas::open_store(url).await
}

/// Not a test of its own: the body of a child server process. Without the
/// environment variable it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_entry() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let server = match role.as_str() {
        "slow" => Server::builder()
            .agent(slow(memory(), Duration::from_millis(1500)))
            .shutdown_grace(Duration::from_secs(10))
            .build()
            .unwrap(),
        "replica" => {
            let url = std::env::var(STORE_URL).unwrap();
            let store = open_store(&url).await;
            with_auth(Server::builder())
                .agent(bank(store.clone()))
                .agent(ops(store, Arc::new(AtomicUsize::new(0))))
                .signing_keys(shared_keys())
                .build()
                .unwrap()
        }
        "kill" => {
            let runs = std::env::var(crate::kill::RUNS).unwrap();
            crate::kill::server(&std::env::var(STORE_URL).unwrap(), runs.into()).await
        }
        other => panic!("unknown child role {other}"),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("LISTENING {}", listener.local_addr().unwrap());
    holdpoint_server::serve(listener, &server, holdpoint_server::shutdown_signal())
        .await
        .unwrap();
    println!("STOPPED");
}
