//! Gemini API: `generateContent` and `streamGenerateContent?alt=sse`, with
//! bodies shaped as in the Gemini API reference.

use std::sync::Arc;

use holdpoint::model::{ChunkSink, GenerateRequest, Model, ToolDefinition};
use holdpoint::tool::DynamicTool;
use holdpoint::{FinishReason, GenerateOptions, Message, Part, Resume, Role, Status, generate};
use holdpoint_models::{GeminiConfig, GeminiModel};
use serde_json::{Value, json};

use crate::support::{KEY, MockServer, Reply, chunk_texts, fast_http, recording_sink, sse_text};

fn model(server: &MockServer) -> GeminiModel {
    GeminiModel::from_config(
        "gemini-2.5-flash",
        GeminiConfig::new(KEY).base_url(&server.url).http(fast_http()),
    )
    .unwrap()
}

fn candidate(parts: Value, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = json!(f);
    }
    json!({"candidates": [c], "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"})
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "getWeather".into(),
        description: "Current weather in a city".into(),
        input_schema: Some(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "WeatherInput",
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"$ref": "#/$defs/Unit"},
                "days": {"type": ["integer", "null"], "format": "uint8", "minimum": 0}
            },
            "required": ["city"],
            "additionalProperties": false,
            "$defs": {"Unit": {"type": "string", "enum": ["C", "F"]}}
        })),
        output_schema: None,
        metadata: None,
    }
}

#[tokio::test]
async fn plain_text_sends_system_history_and_config() {
    let mut answer = candidate(json!([{"text": "Hello there."}]), Some("STOP"));
    answer["usageMetadata"] = json!({"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10});
    let server = MockServer::start(vec![Reply::json(answer)]).await;
    let mut request = GenerateRequest::new(vec![
        Message::new(Role::System, vec![Part::text("You are terse.")]),
        Message::user_text("Hi"),
        Message::model_text("Hello?"),
        Message::user_text("Greet me"),
    ]);
    request.config = Some(json!({"temperature": 0.3, "maxOutputTokens": 100, "stopSequences": ["END"], "topP": 0.9}));
    let response = model(&server).generate(request, ChunkSink::none()).await.unwrap();

    let sent = server.request();
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(sent.header("x-goog-api-key"), Some(KEY));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Hi"}]},
                {"role": "model", "parts": [{"text": "Hello?"}]},
                {"role": "user", "parts": [{"text": "Greet me"}]}
            ],
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "generationConfig": {"temperature": 0.3, "topP": 0.9, "maxOutputTokens": 100, "stopSequences": ["END"]}
        })
    );
    assert_eq!(response.text(), "Hello there.");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.input_tokens, Some(7));
    assert_eq!(response.usage.output_tokens, Some(3));
    assert_eq!(response.usage.total_tokens, Some(10));
}

#[tokio::test]
async fn streaming_text_sends_a_chunk_per_delta() {
    let mut last = candidate(json!([{"text": "ld!"}]), Some("STOP"));
    last["usageMetadata"] = json!({"promptTokenCount": 4, "candidatesTokenCount": 4, "totalTokenCount": 8});
    let text = sse_text(&[
        ("", candidate(json!([{"text": "Hel"}]), None)),
        ("", candidate(json!([{"text": "lo, wör"}]), None)),
        ("", last),
    ]);
    let server = MockServer::start(vec![Reply::sse_in_pieces(text, 7)]).await;
    let (sink, chunks) = recording_sink();
    let response = model(&server)
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink)
        .await
        .unwrap();
    let sent = server.request();
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(KEY));
    assert_eq!(chunk_texts(&chunks), vec!["Hel", "lo, wör", "ld!"]);
    assert!(chunks.lock().unwrap().iter().all(|c| c.role == Some(Role::Model)));
    let message = response.message.as_ref().unwrap();
    assert_eq!(message.content.len(), 1, "deltas are joined into one text part");
    assert_eq!(response.text(), "Hello, wörld!");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.total_tokens, Some(8));
}

#[tokio::test]
async fn parallel_function_calls_stream_into_tool_requests_with_shaped_schema() {
    let parts = json!([
        {"functionCall": {"id": "fc-1", "name": "getWeather", "args": {"city": "Zürich"}}, "thoughtSignature": "c2lnLTE="},
        {"functionCall": {"id": "fc-2", "name": "getWeather", "args": {"city": "Köln", "unit": "C"}}}
    ]);
    let text = sse_text(&[
        ("", candidate(json!([{"text": ""}]), None)),
        ("", candidate(parts, Some("STOP"))),
    ]);
    let server = MockServer::start(vec![Reply::sse_in_pieces(text, 5)]).await;
    let mut request = GenerateRequest::new(vec![Message::user_text("Weather in Zürich and Köln?")]);
    request.tools = vec![weather_tool()].into();
    request.tool_choice = Some("auto".into());
    let (sink, chunks) = recording_sink();
    let response = model(&server).generate(request, sink).await.unwrap();

    let sent = server.request();
    assert_eq!(
        sent.body["tools"],
        json!([{"functionDeclarations": [{
            "name": "getWeather",
            "description": "Current weather in a city",
            "parameters": {
                "title": "WeatherInput",
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["C", "F"]},
                    "days": {"type": "integer", "nullable": true, "minimum": 0}
                },
                "required": ["city"]
            }
        }]}])
    );
    assert_eq!(
        sent.body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    assert!(chunk_texts(&chunks).is_empty(), "no text, no chunks");
    let message = response.message.unwrap();
    let mut first = Part::tool_request("getWeather", Some("fc-1".into()), Some(json!({"city": "Zürich"})));
    first.set_meta("thoughtSignature", json!("c2lnLTE="));
    let second = Part::tool_request(
        "getWeather",
        Some("fc-2".into()),
        Some(json!({"city": "Köln", "unit": "C"})),
    );
    assert_eq!(message.content, vec![first, second]);
}

#[tokio::test]
async fn tool_results_round_trip_with_ids_and_signatures() {
    let server = MockServer::start(vec![Reply::json(candidate(json!([{"text": "Done."}]), Some("STOP")))]).await;
    let mut call = Part::tool_request("getWeather", Some("fc-1".into()), Some(json!({"city": "Oslo"})));
    call.set_meta("thoughtSignature", json!("c2ln"));
    let history = vec![
        Message::user_text("Weather?"),
        Message::new(
            Role::Model,
            vec![
                call,
                Part::tool_request("lookup", Some("fc-2".into()), Some(json!({}))),
                Part::tool_request("broken", Some("fc-3".into()), Some(json!({}))),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![
                Part::tool_response("getWeather", Some("fc-1".into()), Some(json!({"tempC": -3}))),
                Part::tool_response("lookup", Some("fc-2".into()), Some(json!("plain text"))),
                Part::tool_response("broken", Some("fc-3".into()), Some(json!({"error": "service down"}))),
            ],
        ),
    ];
    let response = model(&server)
        .generate(GenerateRequest::new(history), ChunkSink::none())
        .await
        .unwrap();
    assert_eq!(response.text(), "Done.");
    assert_eq!(
        server.request().body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "fc-1", "name": "getWeather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"},
                {"functionCall": {"id": "fc-2", "name": "lookup", "args": {}}},
                {"functionCall": {"id": "fc-3", "name": "broken", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc-1", "name": "getWeather", "response": {"tempC": -3}}},
                {"functionResponse": {"id": "fc-2", "name": "lookup", "response": {"output": "plain text"}}},
                {"functionResponse": {"id": "fc-3", "name": "broken", "response": {"error": "service down"}}}
            ]}
        ])
    );
}

#[tokio::test]
async fn interrupt_and_resume_send_the_paused_call_back() {
    // Gemini often omits call ids: Holdpoint assigns refs and sends them back.
    let server = MockServer::start(vec![
        Reply::json(candidate(
            json!([{"functionCall": {"name": "transferMoney", "args": {"amount": 500}}}]),
            Some("STOP"),
        )),
        Reply::json(candidate(json!([{"text": "Transferred."}]), Some("STOP"))),
    ])
    .await;
    let model: Arc<dyn Model> = Arc::new(model(&server));
    let tool = DynamicTool::new(
        "transferMoney",
        "Moves money",
        json!({"type": "object", "properties": {"amount": {"type": "number"}}}),
        |ctx, _input| async move { Err(ctx.interrupt(json!({"message": "approve?"}))) },
    )
    .into_tool();
    let first = generate(
        GenerateOptions::new(Arc::clone(&model))
            .messages(vec![Message::user_text("Send $500")])
            .tools(vec![Arc::clone(&tool)]),
    )
    .await
    .unwrap();
    assert!(first.is_interrupted());
    let paused = first.response.interrupts().remove(0);
    let reference = paused.as_tool_request().unwrap().reference.clone().unwrap();

    let resumed = generate(
        GenerateOptions::new(model)
            .messages(first.messages.clone())
            .tools(vec![tool])
            .resume(Resume::from_parts([paused.respond(json!({"status": "sent"})).unwrap()])),
    )
    .await
    .unwrap();
    assert_eq!(resumed.response.text(), "Transferred.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Send $500"}]},
            {"role": "model", "parts": [{"functionCall": {"id": reference, "name": "transferMoney", "args": {"amount": 500}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": reference, "name": "transferMoney", "response": {"status": "sent"}}}]}
        ])
    );
}

#[tokio::test]
async fn bad_key_is_unauthenticated_with_gemini_message() {
    let server = MockServer::start(vec![Reply::error(
        400,
        json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
    )])
    .await;
    let err = model(&server)
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), ChunkSink::none())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unauthenticated);
    assert!(err.to_string().contains("API key not valid"), "{err}");
}

#[tokio::test]
async fn stream_without_finish_reason_is_unavailable() {
    let text = sse_text(&[("", candidate(json!([{"text": "Half an ans"}]), None))]);
    let server = MockServer::start(vec![Reply::sse(text)]).await;
    let (sink, chunks) = recording_sink();
    let err = model(&server)
        .generate(GenerateRequest::new(vec![Message::user_text("Hi")]), sink)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Status::Unavailable);
    assert!(err.to_string().contains("finishReason"), "{err}");
    assert_eq!(chunk_texts(&chunks), vec!["Half an ans"]);
}

#[tokio::test]
async fn prompt_blocked_is_a_blocked_finish() {
    let server = MockServer::start(vec![Reply::json(
        json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}}),
    )])
    .await;
    let response = model(&server)
        .generate(GenerateRequest::new(vec![Message::user_text("…")]), ChunkSink::none())
        .await
        .unwrap();
    assert_eq!(response.finish_reason, Some(FinishReason::Blocked));
    assert_eq!(response.finish_message.as_deref(), Some("SAFETY"));
    assert!(response.message.unwrap().content.is_empty());
}
