//! A model provider that drops its stream mid-tool-call or hangs: the turn
//! fails clearly (HTTP 200, `finishReason: failed`), no tool runs, nothing
//! is written, and the session stays resumable.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdpoint::ToolContext;
use holdpoint::agent::Agent;
use holdpoint::session::{SessionStore, SnapshotStatus};
use holdpoint::tool::tool;
use holdpoint_models::{HttpOptions, OpenAiConfig, OpenAiModel};
use holdpoint_server::Server;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// A complete stream answering with text.
    Text,
    /// Starts a tool call, sends half its arguments, and closes the socket.
    DropMidToolCall,
    /// Starts a tool call and then sends nothing more, holding the socket.
    Hang,
}

fn frame(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// Reads one request; whether it asked for a stream.
async fn read_request(socket: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else {
            return false;
        };
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if body.len() >= length {
                return body.replace(' ', "").contains("\"stream\":true");
            }
        }
    }
}

/// An OpenAI-compatible streaming endpoint that answers each request with
/// the next mode.
async fn provider(modes: Vec<Mode>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let modes = Arc::new(Mutex::new(VecDeque::from(modes)));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let modes = modes.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let streaming = read_request(&mut socket).await;
                seen.fetch_add(1, Ordering::SeqCst);
                let mode = modes.lock().unwrap().pop_front().unwrap_or(Mode::Text);
                if !streaming {
                    let body = json!({"id": "c1", "object": "chat.completion", "created": 1_700_000_000, "model": "m",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": "all good"}, "finish_reason": "stop"}]})
                    .to_string();
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                let _ = socket.write_all(head.as_bytes()).await;
                let start_call = frame(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "closeAccount", "arguments": "{\"acc"}}]}),
                    None,
                );
                match mode {
                    Mode::Text => {
                        let body = format!(
                            "{}{}data: [DONE]\n\n",
                            frame(json!({"role": "assistant", "content": "all good"}), None),
                            frame(json!({}), Some("stop"))
                        );
                        let _ = socket.write_all(body.as_bytes()).await;
                    }
                    Mode::DropMidToolCall => {
                        let _ = socket.write_all(start_call.as_bytes()).await;
                        let _ = socket.flush().await;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        // Dropped without [DONE] or a finish reason.
                    }
                    Mode::Hang => {
                        let _ = socket.write_all(start_call.as_bytes()).await;
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                }
            });
        }
    });
    (url, calls)
}

#[tokio::test]
async fn a_provider_that_drops_or_hangs_mid_tool_call_fails_the_turn_and_keeps_the_session() {
    let (url, calls) = provider(vec![Mode::Text, Mode::DropMidToolCall, Mode::Hang]).await;
    let http = HttpOptions::default()
        .max_retries(0)
        .read_timeout(Duration::from_millis(700))
        .timeout(Duration::from_secs(5));
    let model = OpenAiModel::from_config("m", OpenAiConfig::compatible(url, None).http(http)).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let close = tool(
        "closeAccount",
        "Closes an account",
        move |_ctx: ToolContext, a: Account| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"closed": a.account}))
            }
        },
    );
    let store = memory();
    let agent = Agent::builder("opsAgent")
        .model(Arc::new(model))
        .tool(close)
        .store(store.clone())
        .build()
        .unwrap();
    let s = TestServer::start(Server::builder().agent(agent).build().unwrap()).await;
    let path = "/agents/opsAgent";

    let (code, body) = s.post(path, json!({"data": user("hello")}), None).await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    let session = body["result"]["sessionId"].clone();
    let mut before = dump(store.as_ref()).await;

    // Dropped mid-tool-call, then hanging mid-tool-call (bounded by the read timeout).
    for what in ["dropped", "hung"] {
        let started = Instant::now();
        let r = s
            .client
            .post(s.url("/agents/opsAgent?stream=true"))
            .json(&json!({"data": user("close a-1"), "init": {"sessionId": session}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{what}");
        let text = r.text().await.unwrap();
        let last = text.lines().rev().find_map(|l| l.strip_prefix("data: ")).unwrap();
        let body: Value = serde_json::from_str(last).unwrap();
        let out = &body["result"];
        assert_eq!(out["finishReason"], "failed", "{what}: {body:#}");
        let status = out["error"]["status"].as_str().unwrap();
        let expected = if what == "dropped" {
            "UNAVAILABLE"
        } else {
            "DEADLINE_EXCEEDED"
        };
        assert_eq!(status, expected, "{what}: {body:#}");
        assert!(!out["error"]["message"].as_str().unwrap().is_empty());
        println!("provider {what}: {status}: {}", out["error"]["message"]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what} took {:?}",
            started.elapsed()
        );
        assert_eq!(
            runs.load(Ordering::SeqCst),
            0,
            "{what}: a half-streamed call never runs"
        );
        // The failed turn keeps its seam: a failed snapshot after the
        // session's latest, holding the conversation through the new
        // message and nothing of the half-streamed call.
        let (rows, _) = dump(store.as_ref()).await;
        assert_eq!(rows.len(), before.0.len() + 1, "{what}: one failed snapshot");
        let failed = store
            .get_latest_snapshot(session.as_str().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(failed.status, SnapshotStatus::Failed, "{what}");
        assert_eq!(out["snapshotId"], failed.snapshot_id.as_str(), "{what}");
        let kept = failed.state.unwrap().messages;
        assert_eq!(kept.last().unwrap().text(), "close a-1", "{what}: {kept:?}");
        before = dump(store.as_ref()).await;
    }

    // The session goes on from where it was.
    let (code, body) = s
        .post(
            path,
            json!({"data": user("hello again"), "init": {"sessionId": session}}),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body:#}");
    assert_eq!(body["result"]["finishReason"], "stop", "{body:#}");
    assert_eq!(body["result"]["sessionId"], session);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}
