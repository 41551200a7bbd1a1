//! OpenAI Chat Completions and compatible servers (Ollama, vLLM), with
//! bodies and `chat.completion.chunk` streams shaped as in OpenAI's API
//! reference.

use std::sync::Arc;

use holdpoint::model::{ChunkSink, GenerateRequest, Model, ToolDefinition};
use holdpoint::tool::DynamicTool;
use holdpoint::{FinishReason, GenerateOptions, Message, Part, PartKind, Resume, Role, Status, generate};
use holdpoint_models::{ApiKey, OpenAiConfig, OpenAiModel};
use serde_json::{Value, json};

use crate::support::{KEY, MockServer, Reply, chunk_texts, fast_http, recording_sink, sse_text};

fn openai(server: &MockServer) -> OpenAiModel {
    let config = OpenAiConfig::openai(KEY)
        .base_url(format!("{}/v1", server.url))
        .http(fast_http());
    OpenAiModel::from_config("gpt-4o-mini", config).unwrap()
}

fn completion(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-123", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens_details": {"reasoning_tokens": 1}}
    })
}

fn chunk(delta: Value, finish: Option<&str>) -> (&'static str, Value) {
    (
        "",
        json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
    )
}

fn usage_chunk() -> (&'static str, Value) {
    (
        "",
        json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "gpt-4o-mini",
            "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}}),
    )
}

fn done(mut text: String) -> String {
    text.push_str("data: [DONE]\n\n");
    text
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "getWeather".into(),
        description: "Current weather in a city".into(),
        input_schema: Some(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/Unit"}},
            "required": ["city"],
            "additionalProperties": false,
            "$defs": {"Unit": {"type": "string", "enum": ["C", "F"]}}
        })),
        output_schema: None,
        metadata: None,
    }
}

#[tokio::test]
async fn plain_text_sends_bearer_key_messages_and_config() {
    let server = MockServer::start(vec![Reply::json(completion(
        json!({"role": "assistant", "content": "Hello there.", "refusal": null}),
        "stop",
    ))])
    .await;
    let mut request = GenerateRequest::new(vec![
        Message::new(Role::System, vec![Part::text("You are terse.")]),
        Message::user_text("Hi"),
    ]);
    request.config = Some(json!({"temperature": 0.3, "maxOutputTokens": 100, "stopSequences": ["END"], "topP": 0.9}));
    let response = openai(&server).generate(request, ChunkSink::none()).await.unwrap();

    let sent = server.request();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
            "temperature": 0.3, "top_p": 0.9, "max_completion_tokens": 100, "stop": ["END"]
        })
    );
    assert_eq!(response.text(), "Hello there.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.input_tokens, Some(9));
    assert_eq!(response.usage.output_tokens, Some(3));
    assert_eq!(response.usage.total_tokens, Some(12));
    assert_eq!(response.usage.cached_content_tokens, Some(2));
    assert_eq!(response.usage.thoughts_tokens, Some(1));
}

#[tokio::test]
async fn streaming_text_asks_for_usage_and_sends_chunks() {
    let text = done(sse_text(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo €5"}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(),
    ]));
    let server = MockServer::start(vec![Reply::sse_in_pieces(text, 9)]).await;
    let (sink, chunks) = recording_sink();
    let response = openai(&server)
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink)
        .await
        .unwrap();
    let sent = server.request();
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(chunk_texts(&chunks), vec!["Hel", "lo €5"]);
    assert_eq!(response.text(), "Hello €5");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.total_tokens, Some(26));
}

#[tokio::test]
async fn parallel_tool_call_deltas_split_at_awkward_bytes_are_assembled() {
    let text = done(sse_text(&[
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "getWeather", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Zür"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "ich\"}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "getWeather", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"city\": \"Köln\", "}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "\"unit\": \"C\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(),
    ]));
    // Three-byte pieces split "ü" and "ö" (two bytes each) and the JSON
    // of every event.
    let server = MockServer::start(vec![Reply::sse_in_pieces(text, 3)]).await;
    let mut request = GenerateRequest::new(vec![Message::user_text("Weather in Zürich and Köln?")]);
    request.tools = vec![weather_tool()].into();
    request.tool_choice = Some("required".into());
    let (sink, chunks) = recording_sink();
    let response = openai(&server).generate(request, sink).await.unwrap();

    let sent = server.request();
    assert_eq!(
        sent.body["tools"],
        json!([{"type": "function", "function": {
            "name": "getWeather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
                "required": ["city"],
                "additionalProperties": false
            }
        }}])
    );
    assert_eq!(sent.body["tool_choice"], "required");
    assert!(chunk_texts(&chunks).is_empty());
    assert_eq!(
        response.message.unwrap().content,
        vec![
            Part::tool_request("getWeather", Some("call_a".into()), Some(json!({"city": "Zürich"}))),
            Part::tool_request(
                "getWeather",
                Some("call_b".into()),
                Some(json!({"city": "Köln", "unit": "C"}))
            ),
        ]
    );
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
}

#[tokio::test]
async fn ollama_needs_no_key_and_its_index_zero_parallel_calls_are_told_apart_by_id() {
    let text = done(sse_text(&[
        chunk(
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_2", "type": "function", "function": {"name": "b", "arguments": "{\"y\":2}"}}]}),
            None,
        ),
        chunk(json!({"content": ""}), Some("tool_calls")),
    ]));
    let server = MockServer::start(vec![Reply::sse(text)]).await;
    let model = OpenAiModel::from_config("llama3.2", OpenAiConfig::ollama_host(&server.url).http(fast_http())).unwrap();
    assert_eq!(model.name(), "ollama/llama3.2");
    let (sink, _chunks) = recording_sink();
    let response = model
        .generate(GenerateRequest::new(vec![Message::user_text("go")]), sink)
        .await
        .unwrap();
    let sent = server.request();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), None);
    let names: Vec<(String, Option<String>)> = response
        .message
        .unwrap()
        .tool_requests()
        .filter_map(Part::as_tool_request)
        .map(|r| (r.name.clone(), r.reference.clone()))
        .collect();
    assert_eq!(
        names,
        vec![("a".into(), Some("call_1".into())), ("b".into(), Some("call_2".into()))]
    );
}

#[tokio::test]
async fn compatible_server_gets_max_tokens_and_reasoning_comes_back() {
    let server = MockServer::start(vec![Reply::json(completion(
        json!({"role": "assistant", "content": "42", "reasoning_content": "6 times 7"}),
        "length",
    ))])
    .await;
    let config = OpenAiConfig::compatible(format!("{}/v1", server.url), Some(ApiKey::new(KEY))).http(fast_http());
    let model = OpenAiModel::from_config("Qwen/Qwen2.5-7B-Instruct", config).unwrap();
    let mut request = GenerateRequest::new(vec![Message::user_text("6*7?")]);
    request.config = Some(json!({"maxOutputTokens": 5}));
    let response = model.generate(request, ChunkSink::none()).await.unwrap();
    let sent = server.request();
    assert_eq!(sent.body["max_tokens"], 5);
    assert!(sent.body.get("max_completion_tokens").is_none());
    assert_eq!(sent.body["model"], "Qwen/Qwen2.5-7B-Instruct");
    let content = response.message.unwrap().content;
    assert_eq!(content[0].kind, PartKind::Reasoning("6 times 7".into()));
    assert_eq!(content[1].as_text(), Some("42"));
    assert_eq!(response.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn interrupt_resume_and_soft_failure_round_trip_through_tool_messages() {
    let server = MockServer::start(vec![
        Reply::json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_t", "type": "function", "function": {"name": "transferMoney", "arguments": "{\"amount\":500}"}},
                {"id": "call_b", "type": "function", "function": {"name": "balance", "arguments": "{}"}}
            ]}),
            "tool_calls",
        )),
        Reply::json(completion(json!({"role": "assistant", "content": "Sent; balance unknown."}), "stop")),
    ])
    .await;
    let model: Arc<dyn Model> = Arc::new(openai(&server));
    let transfer = DynamicTool::new(
        "transferMoney",
        "Moves money",
        json!({"type": "object"}),
        |ctx, _input| async move { Err(ctx.interrupt(json!({"message": "approve?"}))) },
    )
    .into_tool();
    let balance = DynamicTool::new(
        "balance",
        "Reads the balance",
        json!({"type": "object"}),
        |ctx, _input| async move { Err(ctx.fail("bank offline")) },
    )
    .into_tool();
    let tools = vec![Arc::clone(&transfer), Arc::clone(&balance)];
    let first = generate(
        GenerateOptions::new(Arc::clone(&model))
            .messages(vec![Message::user_text("Send $500, then tell me my balance")])
            .tools(tools.clone()),
    )
    .await
    .unwrap();
    assert!(first.is_interrupted());
    let paused = first.response.interrupts().remove(0);
    let resumed = generate(
        GenerateOptions::new(model)
            .messages(first.messages.clone())
            .tools(tools)
            .resume(Resume::from_parts([paused.respond(json!({"status": "sent"})).unwrap()])),
    )
    .await
    .unwrap();
    assert_eq!(resumed.response.text(), "Sent; balance unknown.");
    let second = &server.requests()[1];
    assert_eq!(
        second.body["messages"],
        json!([
            {"role": "user", "content": "Send $500, then tell me my balance"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_t", "type": "function", "function": {"name": "transferMoney", "arguments": "{\"amount\":500}"}},
                {"id": "call_b", "type": "function", "function": {"name": "balance", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_t", "content": "{\"status\":\"sent\"}"},
            {"role": "tool", "tool_call_id": "call_b", "content": "{\"error\":\"bank offline\"}"}
        ])
    );
    assert_eq!(second.body["tools"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn truncated_and_broken_streams_are_internal() {
    let cut = sse_text(&[chunk(json!({"role": "assistant", "content": "Half"}), None)]);
    let broken = sse_text(&[chunk(json!({"content": "Half"}), None)]);
    let bad_args = done(sse_text(&[
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function", "function": {"name": "t", "arguments": "{\"a\": "}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let malformed = "data: {\"choices\": [\n\n".to_owned();
    let server = MockServer::start(vec![
        Reply::sse(cut),
        Reply::SseThenAbort(broken),
        Reply::sse(bad_args),
        Reply::sse(malformed),
    ])
    .await;
    let model = openai(&server);
    // A cut connection is UNAVAILABLE (a retry may succeed); bad content is INTERNAL.
    for (expected, status) in [
        ("before a finish_reason", Status::Unavailable),
        ("broke off", Status::Unavailable),
        ("tool call \"t\" are not valid JSON", Status::Internal),
        ("malformed stream event", Status::Internal),
    ] {
        let (sink, _) = recording_sink();
        let err = model
            .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink)
            .await
            .unwrap_err();
        assert_eq!(err.status(), status, "{err}");
        assert!(err.to_string().contains(expected), "{err} should mention {expected}");
    }
}
