//! Test receivers: an HTTP endpoint that records what is posted to it
//! (webhooks, Slack), and a log sink a test reads back.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;

/// A receiver answering the statuses in its script, then 200.
#[derive(Clone, Default)]
pub struct Receiver {
    pub script: Arc<Mutex<VecDeque<u16>>>,
    pub hits: Arc<Mutex<Vec<String>>>,
    /// Each request's path and JSON body, in order.
    pub bodies: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
}

impl Receiver {
    pub async fn start(script: Vec<u16>) -> (Self, std::net::SocketAddr) {
        let r = Receiver::default();
        r.script.lock().unwrap().extend(script);
        async fn take(State(r): State<Receiver>, uri: axum::http::Uri, body: axum::body::Bytes) -> StatusCode {
            r.hits.lock().unwrap().push(uri.path().to_owned());
            let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            r.bodies.lock().unwrap().push((uri.path().to_owned(), json));
            StatusCode::from_u16(r.script.lock().unwrap().pop_front().unwrap_or(200)).unwrap()
        }
        let app = Router::new().route("/{*path}", post(take)).with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, addr)
    }
}

/// A log sink the test reads back.
#[derive(Clone, Default)]
pub struct Logs(pub Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Everything logged so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
