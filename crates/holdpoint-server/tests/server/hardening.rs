//! Hardening of the server as a network service: label values a client
//! cannot grow, DNS rebinding of anonymous loopback servers, slow and idle
//! connections and the connection bound, who may scrape `/metrics` and how
//! cheaply, and `nosniff` on every response.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use holdpoint_server::{Metrics, Server};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_owned()
}

fn port(s: &TestServer) -> String {
    addr(s).rsplit_once(':').unwrap().1.to_owned()
}

/// One raw HTTP exchange on a fresh connection: the status code, the head
/// and the body (by Content-Length, or up to the close).
async fn exchange(address: &str, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    read_one(&mut stream).await
}

async fn read_one(stream: &mut TcpStream) -> (u16, String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            });
            let code = head.split(' ').nth(1).unwrap().parse().unwrap();
            if head.starts_with("HTTP/1.1 101") || length.is_some_and(|n| body.len() >= n) {
                let body = length.map_or(String::new(), |n| body[..n].to_owned());
                return (code, head.to_owned(), body);
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(n > 0, "closed without a whole response: {text:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Whether the server closes `stream` (a read returns end of file) within
/// 10 s; bytes it sends first are skipped.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

fn json_error(body: &str) -> Value {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    assert!(value["error"]["status"].is_string(), "{value:#}");
    assert!(value["error"]["message"].is_string(), "{value:#}");
    value
}

// ---- Label values a request controls -------------------------------------

#[tokio::test]
async fn invented_methods_and_paths_do_not_grow_the_metrics() {
    let f = fixture(false).await;
    let s = &f.server;
    let address = addr(s);
    let invent = |n: usize| format!("X{n}{}", "M".repeat(4_000));
    let send = |method: String, path: String| {
        let address = address.clone();
        async move {
            let request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
            exchange(&address, &request).await.0
        }
    };
    // Each kind of request once, and a scrape, so that every series the
    // loop below touches exists before it.
    assert_eq!(send(invent(0), "/agents".into()).await, 405);
    assert_eq!(send(invent(0), "/agents/bankingAgent/x0".into()).await, 404);
    assert_eq!(send("GET".into(), "/nowhere-0".into()).await, 404);
    let _ = s.metrics().await;
    let before = s.metrics().await;
    for n in 1..=12 {
        assert_eq!(send(invent(n), format!("/agents/bankingAgent/x{n}")).await, 404);
        assert_eq!(send("GET".into(), format!("/nowhere-{n}")).await, 404);
    }
    let after = s.metrics().await;
    assert!(!after.contains("MMMM"), "an invented method became a label value");
    assert!(!after.contains("nowhere"), "a request path became a label value");
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    // The scrape's own series (its 200 and the gauges) were there before.
    assert_eq!(series(&after), series(&before), "new series:\n{after}");
    assert_eq!(
        sample(&after, "holdpoint_http_requests_total", &[("method", "other")]),
        14.0,
        "{after}"
    );
    assert_eq!(
        sample(
            &after,
            "holdpoint_http_requests_total",
            &[("method", "GET"), ("route", "unmatched"), ("code", "404")]
        ),
        13.0,
        "{after}"
    );
}

// ---- DNS rebinding --------------------------------------------------------

#[tokio::test]
async fn anonymous_servers_answer_loopback_hosts_only() {
    let f = fixture(false).await;
    let s = &f.server;
    let (address, port) = (addr(s), port(s));
    let before = dump(f.store.as_ref()).await;
    let turn = json!({"data": user("Transfer $5 to bob")}).to_string();
    let post = |host: &str| {
        format!(
            "POST /agents/bankingAgent HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{turn}",
            turn.len()
        )
    };
    let get = |host: &str, path: &str| format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");

    // A rebound name: listing, starting and connecting are all refused.
    for request in [
        get(&format!("rebind.example:{port}"), "/agents"),
        get(&format!("rebind.example:{port}"), "/agents/bankingAgent/pending"),
        get("rebind.example", "/"),
        get(&format!("127.0.0.1.rebind.example:{port}"), "/agents"),
        post(&format!("rebind.example:{port}")),
        // Absolute form names the host in the request line.
        get(&format!("127.0.0.1:{port}"), "http://rebind.example/agents"),
    ] {
        let (code, _, body) = exchange(&address, &request).await;
        assert_eq!(code, 421, "{request}");
        let error = json_error(&body);
        assert_eq!(error["error"]["status"], "PERMISSION_DENIED", "{error:#}");
    }
    // The WebSocket of a rebound page: its Origin equals its Host.
    let upgrade = format!(
        "GET /agents/bankingAgent/connect HTTP/1.1\r\nHost: rebind.example:{port}\r\nOrigin: http://rebind.example:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let (code, _, body) = exchange(&address, &upgrade).await;
    assert_eq!(code, 421, "{body}");
    json_error(&body);
    assert_eq!(dump(f.store.as_ref()).await, before, "refused requests write nothing");

    // Loopback names and addresses, with or without a port.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".to_owned(),
        format!("app.localhost:{port}"),
    ] {
        let (code, _, body) = exchange(&address, &get(&host, "/agents")).await;
        assert_eq!(code, 200, "{host}: {body}");
    }
    // A cross-origin page on the loopback host: refused, request and
    // WebSocket upgrade alike; the server's own page is not.
    let cross = format!(
        "GET /agents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n"
    );
    let (code, _, body) = exchange(&address, &cross).await;
    assert_eq!(code, 403, "{body}");
    json_error(&body);
    let cross_ws = upgrade
        .replace(
            &format!("Host: rebind.example:{port}"),
            &format!("Host: 127.0.0.1:{port}"),
        )
        .replace(
            &format!("Origin: http://rebind.example:{port}"),
            "Origin: https://evil.example",
        );
    let (code, _, body) = exchange(&address, &cross_ws).await;
    assert_eq!(code, 403, "{body}");
    let own = cross.replace("https://evil.example", &format!("http://127.0.0.1:{port}"));
    assert_eq!(exchange(&address, &own).await.0, 200);
}

#[tokio::test]
async fn allowed_hosts_admit_a_proxy_name_and_authenticated_servers_any_host() {
    let proxied = TestServer::start(
        Server::builder()
            .agent(bank(memory()))
            .allowed_hosts(["Holdpoint.Internal"])
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let get = |host: &str| format!("GET /agents HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let address = addr(&proxied);
    assert_eq!(exchange(&address, &get("holdpoint.internal")).await.0, 200);
    assert_eq!(exchange(&address, &get("localhost")).await.0, 200);
    assert_eq!(exchange(&address, &get("rebind.example")).await.0, 421);

    let f = fixture(true).await;
    let keyed =
        format!("GET /agents HTTP/1.1\r\nHost: api.example.com\r\nX-API-Key: {ALICE_KEY}\r\nConnection: close\r\n\r\n");
    let (code, _, body) = exchange(&addr(&f.server), &keyed).await;
    assert_eq!(code, 200, "{body}");
}

// ---- Slow, idle and too many connections ----------------------------------

fn short_timeouts() -> holdpoint_server::ServerBuilder {
    Server::builder()
        .agent(bank(memory()))
        .header_read_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_millis(300))
        .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
}

const PARTIAL_HEAD: &str = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";

#[tokio::test]
async fn half_sent_heads_and_silent_connections_are_cut_off_while_others_are_served() {
    let s = TestServer::start(short_timeouts().build().unwrap()).await;
    let address = addr(&s);
    let mut slow = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(PARTIAL_HEAD.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    // A client that connects and sends nothing at all.
    let mut silent = TcpStream::connect(&address).await.unwrap();
    // A client that keeps dribbling its head, a byte at a time, bounded.
    let mut dribbler = TcpStream::connect(&address).await.unwrap();
    dribbler.write_all(PARTIAL_HEAD.as_bytes()).await.unwrap();
    let dribbled = tokio::spawn(async move {
        for _ in 0..100 {
            if dribbler.write_all(b"a").await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        closed_by_server(&mut dribbler).await
    });

    let (code, _) = s.get("/healthz", None).await;
    assert_eq!(code, 200);
    for stream in &mut slow {
        assert!(closed_by_server(stream).await, "a half-sent head kept its connection");
    }
    assert!(closed_by_server(&mut silent).await, "a silent connection stayed open");
    assert!(dribbled.await.unwrap(), "a dribbled head kept its connection");
    let (code, _) = s.get("/healthz", None).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let s = TestServer::start(short_timeouts().build().unwrap()).await;
    let mut stream = TcpStream::connect(addr(&s)).await.unwrap();
    for _ in 0..2 {
        // Keep-alive: the connection serves one request after another.
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let (code, head, _) = read_one(&mut stream).await;
        assert_eq!(code, 200, "{head}");
    }
    assert!(closed_by_server(&mut stream).await, "an idle connection stayed open");
}

#[tokio::test]
async fn turns_longer_than_the_timeouts_are_answered_streamed_or_not() {
    let s = TestServer::start(
        short_timeouts()
            .agent(slow(memory(), Duration::from_millis(1_200)))
            .build()
            .unwrap(),
    )
    .await;
    let (code, body) = s.post("/agents/slowAgent", json!({"data": user("hi")}), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    let streamed = s
        .client
        .post(s.url("/agents/slowAgent?stream=true"))
        .json(&json!({"data": user("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    let text = streamed.text().await.unwrap();
    assert!(text.contains("finally") && text.contains("\"result\""), "{text}");
}

#[tokio::test]
async fn excess_connections_wait_for_a_place_and_are_served_once_slow_ones_are_cut() {
    // One place, generous timeouts: a second connection waits for it.
    let s = TestServer::start(
        Server::builder()
            .agent(bank(memory()))
            .max_connections(1)
            .header_read_timeout(Duration::from_secs(30))
            .idle_timeout(Duration::from_secs(30))
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    let address = addr(&s);
    let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut first = TcpStream::connect(&address).await.unwrap();
    first.write_all(request).await.unwrap();
    assert_eq!(read_one(&mut first).await.0, 200);
    let mut second = TcpStream::connect(&address).await.unwrap();
    second.write_all(request).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), second.read(&mut byte)).await;
    assert!(early.is_err(), "a connection past the bound was served");
    drop(first);
    assert_eq!(read_one(&mut second).await.0, 200);

    // Two places held by slowloris clients: the server stays reachable,
    // because their heads time out.
    let s = TestServer::start(short_timeouts().max_connections(2).build().unwrap()).await;
    let address = addr(&s);
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream.write_all(PARTIAL_HEAD.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    let served = tokio::time::timeout(Duration::from_secs(10), s.get("/healthz", None))
        .await
        .expect("served within 10 s");
    assert_eq!(served.0, 200);
    for stream in &mut slow {
        assert!(closed_by_server(stream).await);
    }
}

// ---- Who may scrape /metrics, and what a scrape costs ----------------------

#[tokio::test]
async fn metrics_need_a_credential_unless_open() {
    let f = fixture(true).await;
    let s = &f.server;
    let got = s.get("/metrics", None).await;
    assert_error(&got, 401, "UNAUTHENTICATED", "credentials");
    let r = s
        .client
        .get(s.url("/metrics"))
        .header("x-api-key", BOB_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("holdpoint_http_requests_total"));

    let open = TestServer::start(
        with_auth(Server::builder().agent(bank(memory())))
            .metrics_open(true)
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    assert!(open.metrics().await.contains("holdpoint_pending_approvals"));
}

#[tokio::test]
async fn a_scrape_counts_waiting_sessions_without_listing_them() {
    let metrics = Metrics::new();
    let store = memory();
    let agent = ops_with(
        "opsAgent",
        metrics.store(store.clone()),
        Arc::new(AtomicUsize::new(0)),
        None,
        None,
    );
    let s = TestServer::start(
        Server::builder()
            .agent(agent)
            .metrics(metrics.clone())
            .signing_keys(holdpoint_server::signing::KeyRing::ephemeral().unwrap())
            .build()
            .unwrap(),
    )
    .await;
    for account in ["a-1", "a-2", "a-3"] {
        let (code, body) = s
            .post(
                "/agents/opsAgent",
                json!({"data": user(&format!("close {account}"))}),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body:#}");
    }
    let ops = |text: &str, op: &str| sample(text, "holdpoint_store_operation_seconds_count", &[("op", op)]);
    let first = s.metrics().await;
    let second = s.metrics().await;
    assert_eq!(
        sample(&second, "holdpoint_pending_approvals", &[("agent", "opsAgent")]),
        3.0
    );
    assert_eq!(
        ops(&second, "list_snapshots"),
        ops(&first, "list_snapshots"),
        "a scrape listed snapshots"
    );
    assert_eq!(ops(&second, "count_waiting") - ops(&first, "count_waiting"), 1.0);
}

// ---- nosniff -----------------------------------------------------------------

#[tokio::test]
async fn every_response_says_nosniff() {
    let f = fixture(false).await;
    let s = &f.server;
    let nosniff = |r: &reqwest::Response| {
        r.headers()
            .get("x-content-type-options")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let ok = s.client.get(s.url("/agents")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(nosniff(&ok).as_deref(), Some("nosniff"));
    let bad = s
        .client
        .post(s.url("/agents/bankingAgent"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(nosniff(&bad).as_deref(), Some("nosniff"));
    for path in ["/nowhere", "/agents/nobody/pending"] {
        let missing = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(missing.status(), 404, "{path}");
        assert_eq!(nosniff(&missing).as_deref(), Some("nosniff"), "{path}");
        json_error(&missing.text().await.unwrap());
    }
    let page = s.client.get(s.url("/")).send().await.unwrap();
    assert_eq!(nosniff(&page).as_deref(), Some("nosniff"));
}
