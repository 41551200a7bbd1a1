//! A connection flood from one client under a low descriptor limit (issue
//! 32, finding #4): a server process with `ulimit -n 128` and 150 silent
//! connections from 127.0.0.1 still answers a well-behaved client at
//! another loopback address (Linux routes all of 127/8 to loopback).
//!
//! The test binary runs itself under `sh -c 'ulimit -n 128; exec …'` with
//! [`ROLE`] set; [`child_process_entry`] then serves until killed.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use holdpoint_server::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

const ROLE: &str = "HOLDPOINT_SERVER_DESCRIPTOR_CHILD";

/// The descriptor limit (soft and hard) of the server process.
const NOFILE: usize = 128;

/// The silent connections of the flood: more than the process may open.
const FLOOD: usize = 150;

/// A server process; killed when dropped.
struct Limited {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_limited() -> Limited {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("sh")
        .args([
            "-c",
            &format!("ulimit -n {NOFILE} && exec \"$0\" \"$@\""),
            exe.to_str().unwrap(),
            "--exact",
            "descriptors::child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " on the same line first.
            if let Some(at) = line.find("LISTENING ") {
                let _ = tx.send(line[at + "LISTENING ".len()..].trim().to_owned());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the child server reports its address");
    Limited {
        child,
        addr: addr.parse().unwrap(),
    }
}

/// Not a test of its own: the body of the server process. Without the
/// environment variable it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_entry() {
    if std::env::var(ROLE).is_err() {
        return;
    }
    // Heads may take a minute, so the flood holds its connections for the
    // whole test rather than being cut by the header timer.
    let server = Server::builder()
        .agent(bank(memory()))
        .header_read_timeout(Duration::from_secs(120))
        .idle_timeout(Duration::from_secs(120))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("LISTENING {}", listener.local_addr().unwrap());
    holdpoint_server::serve(listener, &server, std::future::pending())
        .await
        .unwrap();
}

/// `GET /healthz` from `from`, on a fresh connection.
async fn healthz_from(from: Ipv4Addr, server: SocketAddr) -> reqwest::Result<reqwest::StatusCode> {
    let client = reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .pool_max_idle_per_host(0)
        .build()?;
    Ok(client.get(format!("http://{server}/healthz")).send().await?.status())
}

/// Whether the server closed `stream` (end of file or reset) within `wait`.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(wait, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_client_leaves_the_server_reachable_for_others() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let mut server = start_limited();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).unwrap();
    let nofile = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    assert_eq!(
        nofile.split_whitespace().nth(3),
        Some(NOFILE.to_string().as_str()),
        "{nofile}"
    );
    let other = Ipv4Addr::new(127, 0, 0, 2);
    assert_eq!(
        healthz_from(other, server.addr).await.unwrap(),
        200,
        "served before the flood"
    );

    // The flood: silent connections holding half a request head each.
    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        // A connection the server closed already may refuse the write.
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await;
        flood.push(stream);
    }

    // A well-behaved client elsewhere is answered while the flood holds on
    // (the timeout is for liveness only: the flood's heads may take 120 s).
    let served = tokio::time::timeout(Duration::from_secs(30), healthz_from(other, server.addr))
        .await
        .expect("a well-behaved client is served during the flood");
    assert_eq!(served.unwrap(), 200);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server process is alive"
    );

    // The server could not hold them all: it closed what it would not keep
    // rather than leaving them to fill its backlog.
    let mut closed = 0;
    for stream in &mut flood {
        closed += usize::from(closed_within(stream, Duration::from_millis(50)).await);
    }
    assert!(
        closed >= FLOOD - NOFILE,
        "only {closed} of the {FLOOD} flood connections were closed"
    );

    // Once the flood is gone (and the server saw its connections close),
    // its client is served again too.
    drop(flood);
    let again = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match healthz_from(Ipv4Addr::LOCALHOST, server.addr).await {
                Ok(code) => return code,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("served after the flood");
    assert_eq!(again, 200);
}

/// `ServerBuilder::max_connections_per_client`: past its bound a client's
/// next connection is closed at once, while another client is served and
/// the first is served again once it lets a connection go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_client_bound_is_set_on_the_builder() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let server = Server::builder()
        .agent(bank(memory()))
        .max_connections_per_client(2)
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { holdpoint_server::serve(listener, &server, std::future::pending()).await });

    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        held.push(stream);
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut third, Duration::from_secs(5)).await,
        "a third connection from one client is closed"
    );
    assert_eq!(
        healthz_from(Ipv4Addr::new(127, 0, 0, 2), addr).await.unwrap(),
        200,
        "another client is served"
    );
    drop(held);
    let again = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match healthz_from(Ipv4Addr::LOCALHOST, addr).await {
                Ok(code) => return code,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("served once its connections are gone");
    assert_eq!(again, 200);
}
