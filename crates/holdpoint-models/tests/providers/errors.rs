//! HTTP failures, retries, timeouts, and keeping keys secret — shared
//! behaviour checked through each provider.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdpoint::model::{ChunkSink, GenerateRequest, Model};
use holdpoint::{Message, Status};
use holdpoint_models::{
    AnthropicConfig, AnthropicModel, GeminiConfig, GeminiModel, OpenAiConfig, OpenAiModel, Registry,
};
use serde_json::json;

use crate::support::{KEY, MockServer, Reply, fast_http, recording_sink};

fn openai(server: &MockServer) -> OpenAiModel {
    let config = OpenAiConfig::openai(KEY)
        .base_url(format!("{}/v1", server.url))
        .http(fast_http());
    OpenAiModel::from_config("gpt-4o-mini", config).unwrap()
}

fn anthropic(server: &MockServer) -> AnthropicModel {
    AnthropicModel::from_config(
        "claude-haiku-4-5",
        AnthropicConfig::new(KEY).base_url(&server.url).http(fast_http()),
    )
    .unwrap()
}

fn gemini(server: &MockServer) -> GeminiModel {
    GeminiModel::from_config(
        "gemini-2.5-flash",
        GeminiConfig::new(KEY).base_url(&server.url).http(fast_http()),
    )
    .unwrap()
}

fn hi() -> GenerateRequest {
    GenerateRequest::new(vec![Message::user_text("Hi")])
}

fn ok_completion() -> serde_json::Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})
}

fn openai_error(message: &str, kind: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

#[tokio::test]
async fn unauthorized_and_forbidden_carry_the_provider_message_without_retry() {
    let server = MockServer::start(vec![
        Reply::error(401, json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})),
        Reply::error(403, json!({"type": "error", "error": {"type": "permission_error", "message": "Your API key does not have permission to use the specified resource."}})),
    ])
    .await;
    let model = anthropic(&server);
    let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::Unauthenticated);
    assert_eq!(err.to_string(), "anthropic: HTTP 401: invalid x-api-key");
    let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::PermissionDenied);
    assert!(err.to_string().contains("does not have permission"), "{err}");
    assert_eq!(server.requests().len(), 2, "client errors are not retried");
}

#[tokio::test]
async fn rate_limit_then_success_waits_as_retry_after_says() {
    let server = MockServer::start(vec![
        Reply::Json(
            429,
            openai_error("Rate limit reached for gpt-4o-mini", "requests"),
            vec![("retry-after", "1")],
        ),
        Reply::json(ok_completion()),
    ])
    .await;
    let started = Instant::now();
    let response = openai(&server).generate(hi(), ChunkSink::none()).await.unwrap();
    assert_eq!(response.text(), "ok");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body, "the retry sends the same body");
}

#[tokio::test]
async fn server_errors_exhaust_retries_as_unavailable() {
    let boom = || {
        Reply::error(
            500,
            json!({"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}),
        )
    };
    let server = MockServer::start(vec![boom(), boom(), boom()]).await;
    let err = gemini(&server).generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert_eq!(
        err.to_string(),
        "googleai: HTTP 500 (after 2 retries): Internal error encountered."
    );
    assert_eq!(server.requests().len(), 3, "one call and two retries");
}

#[tokio::test]
async fn persistent_rate_limit_is_resource_exhausted_and_long_waits_are_not_slept() {
    let limited = || {
        Reply::error(
            429,
            openai_error("You exceeded your current quota", "insufficient_quota"),
        )
    };
    let server = MockServer::start(vec![
        limited(),
        limited(),
        limited(),
        Reply::Json(
            429,
            openai_error("Try again in an hour", "requests"),
            vec![("retry-after", "3600")],
        ),
    ])
    .await;
    let model = openai(&server);
    let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::ResourceExhausted);
    assert!(err.to_string().contains("exceeded your current quota"), "{err}");
    assert_eq!(server.requests().len(), 3);
    let started = Instant::now();
    let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::ResourceExhausted);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        server.requests().len(),
        4,
        "a Retry-After beyond max_backoff ends the retries"
    );
}

#[tokio::test]
async fn anthropic_overloaded_529_is_retried() {
    let server = MockServer::start(vec![
        Reply::error(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        Reply::json(json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})),
    ])
    .await;
    let response = anthropic(&server).generate(hi(), ChunkSink::none()).await.unwrap();
    assert_eq!(response.text(), "ok");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn refused_connections_are_unavailable_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = OpenAiConfig::compatible(format!("http://{addr}/v1"), None).http(fast_http());
    let model = OpenAiModel::from_config("local", config).unwrap();
    let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert!(
        err.to_string().starts_with("openai-compatible: cannot connect"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stalled_stream_hits_the_configured_read_timeout() {
    let server = MockServer::start(vec![Reply::Stall]).await;
    let config = OpenAiConfig::openai(KEY)
        .base_url(format!("{}/v1", server.url))
        .http(fast_http().read_timeout(Duration::from_millis(300)));
    let model = OpenAiModel::from_config("gpt-4o-mini", config).unwrap();
    let (sink, _) = recording_sink();
    let started = Instant::now();
    let err = model.generate(hi(), sink).await.unwrap_err();
    assert_eq!(err.status(), Status::DeadlineExceeded, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A writer that collects everything the tracing subscriber prints.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_key_never_appears_in_debug_output_logs_or_errors() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // Providers echo rejected keys, whole or masked.
    let echo = format!("Incorrect API key provided: {KEY}. You can find your API key at …");
    let masked = format!(
        "Incorrect API key provided: {}****{}.",
        &KEY[..12],
        &KEY[KEY.len() - 8..]
    );
    let server = MockServer::start(vec![
        Reply::error(401, openai_error(&echo, "invalid_request_error")),
        Reply::error(401, openai_error(&masked, "invalid_request_error")),
        Reply::Json(429, openai_error(&echo, "requests"), vec![("retry-after", "0")]),
        Reply::json(ok_completion()),
    ])
    .await;
    let model = openai(&server);
    let mut texts = Vec::new();
    for _ in 0..2 {
        let err = model.generate(hi(), ChunkSink::none()).await.unwrap_err();
        assert_eq!(err.status(), Status::Unauthenticated);
        assert!(err.to_string().contains("Incorrect API key provided"), "{err}");
        texts.push(err.to_string());
        texts.push(format!("{err:?}"));
    }
    model.generate(hi(), ChunkSink::none()).await.unwrap();

    let mut registry = Registry::default();
    registry.openai = Some(OpenAiConfig::openai(KEY));
    registry.gemini = Some(GeminiConfig::new(KEY));
    registry.anthropic = Some(AnthropicConfig::new(KEY));
    texts.push(format!("{registry:?}"));
    texts.push(format!("{model:?}"));
    texts.push(format!("{:?}", gemini(&server)));
    texts.push(format!("{:?}", anthropic(&server)));
    let log_text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(log_text.contains("retrying"), "the retry was logged: {log_text}");
    texts.push(log_text);

    for text in &texts {
        assert!(!text.contains(KEY), "key leaked in: {text}");
        for piece in [&KEY[..8], &KEY[KEY.len() - 8..]] {
            assert!(!text.contains(piece), "key fragment {piece} leaked in: {text}");
        }
    }
    // The key did go where it belongs.
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}
