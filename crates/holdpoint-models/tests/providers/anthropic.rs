//! Anthropic Messages API, with bodies and streaming events
//! (`message_start` … `message_stop`) shaped as in Anthropic's reference.

use holdpoint::model::{ChunkSink, GenerateRequest, Model, ToolDefinition};
use holdpoint::{FinishReason, Message, Part, PartKind, Role, Status};
use holdpoint_models::{AnthropicConfig, AnthropicModel};
use serde_json::{Value, json};

use crate::support::{KEY, MockServer, Reply, chunk_texts, fast_http, recording_sink, sse_text};

fn model(server: &MockServer) -> AnthropicModel {
    AnthropicModel::from_config(
        "claude-sonnet-4-5",
        AnthropicConfig::new(KEY).base_url(&server.url).http(fast_http()),
    )
    .unwrap()
}

fn answer(content: Value, stop: &str) -> Value {
    json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 4, "cache_read_input_tokens": 3}})
}

fn message_start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
    )
}

fn block_start(index: usize, block: Value) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn delta(index: usize, delta: Value) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> (&'static str, Value) {
    (
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_end(stop: &str, output_tokens: u64) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn json_delta(index: usize, partial: &str) -> (&'static str, Value) {
    delta(index, json!({"type": "input_json_delta", "partial_json": partial}))
}

#[tokio::test]
async fn plain_text_sends_key_version_system_and_config() {
    let server = MockServer::start(vec![Reply::json(answer(
        json!([{"type": "text", "text": "Hello there."}]),
        "end_turn",
    ))])
    .await;
    let mut request = GenerateRequest::new(vec![
        Message::new(Role::System, vec![Part::text("You are terse.")]),
        Message::user_text("Hi"),
    ]);
    request.config =
        Some(json!({"temperature": 0.3, "maxOutputTokens": 100, "stopSequences": ["END"], "topP": 0.9, "topK": 40}));
    let response = model(&server).generate(request, ChunkSink::none()).await.unwrap();

    let sent = server.request();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "system": "You are terse.",
            "temperature": 0.3, "top_p": 0.9, "top_k": 40, "stop_sequences": ["END"]
        })
    );
    assert_eq!(response.text(), "Hello there.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.input_tokens, Some(12));
    assert_eq!(response.usage.output_tokens, Some(4));
    assert_eq!(response.usage.total_tokens, Some(16));
    assert_eq!(response.usage.cached_content_tokens, Some(3));
}

#[tokio::test]
async fn streaming_text_and_thinking_send_chunks_and_keep_the_signature() {
    let mut events = vec![
        message_start(),
        block_start(0, json!({"type": "thinking", "thinking": "", "signature": ""})),
        delta(0, json!({"type": "thinking_delta", "thinking": "Greeting; "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "be brief."})),
        delta(0, json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"})),
        block_stop(0),
        ("ping", json!({"type": "ping"})),
        block_start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "Hello"})),
        delta(1, json!({"type": "text_delta", "text": ", wörld"})),
        block_stop(1),
    ];
    events.extend(message_end("end_turn", 15));
    let server = MockServer::start(vec![Reply::sse_in_pieces(sse_text(&events), 11)]).await;
    let mut request = GenerateRequest::new(vec![Message::user_text("Hi")]);
    request.config = Some(json!({"budgetTokens": 1024, "maxOutputTokens": 2048}));
    let (sink, chunks) = recording_sink();
    let response = model(&server).generate(request, sink).await.unwrap();

    let sent = server.request();
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    assert_eq!(chunk_texts(&chunks), vec!["", "", "Hello", ", wörld"]);
    let reasoning: Vec<PartKind> = chunks.lock().unwrap()[..2]
        .iter()
        .map(|c| c.content[0].kind.clone())
        .collect();
    assert_eq!(
        reasoning,
        vec![
            PartKind::Reasoning("Greeting; ".into()),
            PartKind::Reasoning("be brief.".into())
        ]
    );
    let content = response.message.unwrap().content;
    assert_eq!(content[0].kind, PartKind::Reasoning("Greeting; be brief.".into()));
    assert_eq!(content[0].meta("thinkingSignature"), Some(&json!("EqQBCgIYAhIM")));
    assert_eq!(content[1].as_text(), Some("Hello, wörld"));
    assert_eq!(response.usage.input_tokens, Some(25));
    assert_eq!(response.usage.output_tokens, Some(15));
}

#[tokio::test]
async fn parallel_tool_use_input_json_deltas_are_assembled() {
    let mut events = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Checking both."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_01A", "name": "getWeather", "input": {}}),
        ),
        json_delta(1, ""),
        json_delta(1, "{\"city\": \"Zü"),
        json_delta(1, "rich\"}"),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_01B", "name": "getWeather", "input": {}}),
        ),
        json_delta(2, "{\"city\""),
        json_delta(2, ": \"Köln\", \"unit\": \"C\"}"),
        block_stop(2),
    ];
    events.extend(message_end("tool_use", 89));
    // Four-byte pieces split event names, JSON and the two-byte "ü"/"ö".
    let server = MockServer::start(vec![Reply::sse_in_pieces(sse_text(&events), 4)]).await;
    let mut request = GenerateRequest::new(vec![Message::user_text("Weather in Zürich and Köln?")]);
    request.tools = vec![ToolDefinition {
        name: "getWeather".into(),
        description: "Current weather".into(),
        input_schema: Some(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/definitions/Unit"}},
            "required": ["city"],
            "definitions": {"Unit": {"type": "string", "enum": ["C", "F"]}}
        })),
        output_schema: None,
        metadata: None,
    }]
    .into();
    request.tool_choice = Some("required".into());
    let (sink, chunks) = recording_sink();
    let response = model(&server).generate(request, sink).await.unwrap();

    let sent = server.request();
    assert_eq!(
        sent.body["tools"],
        json!([{"name": "getWeather", "description": "Current weather", "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
            "required": ["city"]
        }}])
    );
    assert_eq!(sent.body["tool_choice"], json!({"type": "any"}));
    assert_eq!(sent.body["max_tokens"], 4096);
    assert_eq!(chunk_texts(&chunks), vec!["Checking both."]);
    assert_eq!(
        response.message.unwrap().content,
        vec![
            Part::text("Checking both."),
            Part::tool_request("getWeather", Some("toolu_01A".into()), Some(json!({"city": "Zürich"}))),
            Part::tool_request(
                "getWeather",
                Some("toolu_01B".into()),
                Some(json!({"city": "Köln", "unit": "C"}))
            ),
        ]
    );
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.output_tokens, Some(89));
}

#[tokio::test]
async fn tool_results_round_trip_as_user_turns_with_soft_failures_flagged() {
    let server = MockServer::start(vec![Reply::json(answer(
        json!([{"type": "text", "text": "Zürich: 3°C."}]),
        "end_turn",
    ))])
    .await;
    let mut thinking = Part::from_kind(PartKind::Reasoning("Need weather.".into()));
    thinking.set_meta("thinkingSignature", json!("sig"));
    let history = vec![
        Message::new(Role::System, vec![Part::text("sys")]),
        Message::user_text("Weather?"),
        Message::new(
            Role::Model,
            vec![
                thinking,
                Part::tool_request("getWeather", Some("toolu_1".into()), Some(json!({"city": "Zürich"}))),
                Part::tool_request("getWeather", Some("toolu_2".into()), Some(json!({"city": "Bern"}))),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![
                Part::tool_response("getWeather", Some("toolu_1".into()), Some(json!({"tempC": 3}))),
                Part::tool_response(
                    "getWeather",
                    Some("toolu_2".into()),
                    Some(json!({"error": "station offline"})),
                ),
            ],
        ),
    ];
    let response = model(&server)
        .generate(GenerateRequest::new(history), ChunkSink::none())
        .await
        .unwrap();
    assert_eq!(response.text(), "Zürich: 3°C.");
    assert_eq!(
        server.request().body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Need weather.", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "getWeather", "input": {"city": "Zürich"}},
                {"type": "tool_use", "id": "toolu_2", "name": "getWeather", "input": {"city": "Bern"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"tempC\":3}"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "station offline", "is_error": true}
            ]}
        ])
    );
}

#[tokio::test]
async fn stream_error_event_and_missing_message_stop_are_reported() {
    let overloaded = sse_text(&[
        message_start(),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let cut = sse_text(&[
        message_start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
        ),
        json_delta(0, "{\"a\": 1"),
    ]);
    let wrong_index = sse_text(&[message_start(), delta(3, json!({"type": "text_delta", "text": "x"}))]);
    let server = MockServer::start(vec![Reply::sse(overloaded), Reply::sse(cut), Reply::sse(wrong_index)]).await;
    let model = model(&server);
    let (sink, _) = recording_sink();
    let err = model
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink.clone())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert!(err.to_string().contains("Overloaded"), "{err}");
    let err = model
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink.clone())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert!(err.to_string().contains("message_stop"), "{err}");
    let err = model
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Internal);
    assert!(err.to_string().contains("content block 3"), "{err}");
}
