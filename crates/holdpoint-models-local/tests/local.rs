//! Smoke tests of `local/smollm2` with the real model. They run only when
//! the crate is built with `--features llama-cpp` and the model file is in
//! the model directory (`scripts/fetch-smollm2.sh` puts it there);
//! otherwise each prints why it skipped and passes.

#[cfg(not(feature = "llama-cpp"))]
#[test]
fn smollm2_smoke() {
    println!(
        "skipped: holdpoint-models-local was built without the \"llama-cpp\" feature (cargo test --features llama-cpp)"
    );
}

#[cfg(feature = "llama-cpp")]
mod smoke {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use holdpoint::model::{ChunkSink, FinishReason, GenerateRequest, Model, ToolDefinition};
    use holdpoint::{Message, Part, Role};
    use holdpoint_models_local::{LocalConfig, LocalModel};
    use serde_json::{Value, json};

    const SYSTEM_PROMPT: &str = "You are a helpful banking assistant. Use getBalance to look up balances \
and transferMoney to move money. Every transfer needs the account holder's approval.";

    /// The model, or `None` (after printing why) when the file is missing.
    fn model() -> Option<LocalModel> {
        let Some(config) = LocalConfig::from_env() else {
            println!("skipped: no model directory (set HOLDPOINT_MODEL_DIR or HOME)");
            return None;
        };
        match LocalModel::smollm2(config) {
            Ok(m) => Some(m),
            Err(e) => {
                println!("skipped: {e}");
                None
            }
        }
    }

    fn tool(name: &str, description: &str, schema: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema: Some(schema),
            output_schema: None,
            metadata: None,
        }
    }

    /// The banking example's tools, with the schemas schemars derives for
    /// their argument types.
    fn banking_tools() -> Vec<ToolDefinition> {
        vec![
            tool(
                "getBalance",
                "Returns the balance of an account.",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "BalanceQuery",
                    "description": "Arguments of `getBalance`.",
                    "type": "object",
                    "properties": {"account": {"description": "The account, e.g. `checking`.", "type": "string"}},
                    "required": ["account"]
                }),
            ),
            tool(
                "transferMoney",
                "Transfers money to another account. Requires the account holder's approval.",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "Transfer",
                    "description": "Arguments of `transferMoney`.",
                    "type": "object",
                    "properties": {
                        "amount": {"description": "Amount in dollars.", "type": "number", "format": "double"},
                        "toAccount": {"description": "The destination account.", "type": "string"}
                    },
                    "required": ["amount", "toAccount"]
                }),
            ),
            tool(
                "closeAccount",
                "Closes an account for good.",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "CloseAccount",
                    "description": "Arguments of `closeAccount`.",
                    "type": "object",
                    "properties": {"account": {"description": "The account to close.", "type": "string"}},
                    "required": ["account"]
                }),
            ),
        ]
    }

    fn timings(response: &holdpoint::GenerateResponse) -> String {
        let t = &response.custom["local"];
        format!(
            "prompt {} tokens ({} cached) in {:.0} ms, {} output tokens in {:.0} ms = {:.1} tokens/s",
            response.usage.input_tokens.unwrap_or(0),
            response.usage.cached_content_tokens.unwrap_or(0),
            t["promptEvalMs"].as_f64().unwrap_or(0.0),
            response.usage.output_tokens.unwrap_or(0),
            t["generateMs"].as_f64().unwrap_or(0.0),
            t["outputTokensPerSecond"].as_f64().unwrap_or(0.0),
        )
    }

    #[tokio::test]
    async fn smollm2_calls_transfer_money() {
        let started = Instant::now();
        let Some(model) = model() else { return };
        let load = model.load().await.unwrap();
        println!("model load: {:.0} ms", load.as_secs_f64() * 1000.0);
        let mut request = GenerateRequest::new(vec![
            Message::new(Role::System, vec![Part::text(SYSTEM_PROMPT)]),
            Message::user_text("Transfer $500 to my savings account."),
        ]);
        request.tools = banking_tools().into();
        let response = model.generate(request, ChunkSink::none()).await.unwrap();
        println!("transferMoney call: {}", timings(&response));
        let message = response.message.clone().unwrap();
        let call = message
            .tool_requests()
            .next()
            .and_then(Part::as_tool_request)
            .unwrap_or_else(|| panic!("no tool call: {message:?}"))
            .clone();
        println!("call: {} {}", call.name, call.input.clone().unwrap_or_default());
        assert_eq!(call.name, "transferMoney");
        let input = call.input.unwrap();
        assert_eq!(input["amount"].as_f64(), Some(500.0), "{input}");
        assert!(input["amount"].is_number(), "{input}");
        let to = input["toAccount"].as_str().unwrap_or_default();
        assert!(to.to_lowercase().contains("savings"), "{input}");
        assert_eq!(response.finish_reason, Some(FinishReason::Stop));
        println!("smoke test wall time: {:.2} s", started.elapsed().as_secs_f64());
    }

    #[tokio::test]
    async fn smollm2_streams_text_within_the_token_limit() {
        let Some(model) = model() else { return };
        let model: Arc<dyn Model> = Arc::new(model);
        let streamed = Arc::new(Mutex::new(String::new()));
        let sink = {
            let streamed = Arc::clone(&streamed);
            ChunkSink::new(move |chunk| streamed.lock().unwrap().push_str(&chunk.text()))
        };
        let mut request = GenerateRequest::new(vec![Message::user_text(
            "Write a long story about a dragon who learns to bake bread.",
        )]);
        request.config = Some(json!({"maxOutputTokens": 128, "temperature": 0}));
        let response = model.generate(request.clone(), sink).await.unwrap();
        println!("free text: {}", timings(&response));
        let text = response.text();
        assert!(!text.trim().is_empty());
        assert_eq!(*streamed.lock().unwrap(), text);
        assert_eq!(response.usage.output_tokens, Some(128));
        assert_eq!(response.finish_reason, Some(FinishReason::Length));
        // Greedy decoding is deterministic, and the repeated prompt's KV
        // cache is reused.
        let again = model.generate(request, ChunkSink::none()).await.unwrap();
        assert_eq!(again.text(), text);
        assert!(again.usage.cached_content_tokens.unwrap_or(0) > 0, "{:?}", again.usage);
    }

    #[tokio::test]
    async fn smollm2_json_output_follows_the_schema() {
        let Some(model) = model() else { return };
        let mut request = GenerateRequest::new(vec![Message::user_text(
            "Which city is the capital of France? Give the city and its country.",
        )]);
        request.output = json!({"format": "json", "schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "country": {"enum": ["France", "Germany", "Italy"]},
                "population": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
                "extra": {}
            },
            "required": ["city", "country"]
        }});
        request.config = Some(json!({"maxOutputTokens": 128}));
        let response = model.generate(request, ChunkSink::none()).await.unwrap();
        println!("json output: {} ({})", response.text(), timings(&response));
        if response.finish_reason == Some(FinishReason::Stop) {
            let value: Value = serde_json::from_str(&response.text()).unwrap();
            assert!(value["city"].is_string(), "{value}");
            assert!(
                ["France", "Germany", "Italy"].contains(&value["country"].as_str().unwrap_or("")),
                "{value}"
            );
        } else {
            assert_eq!(response.finish_reason, Some(FinishReason::Length));
        }
    }

    #[tokio::test]
    async fn smollm2_answers_after_a_tool_result() {
        let Some(model) = model() else { return };
        let mut request = GenerateRequest::new(vec![
            Message::new(Role::System, vec![Part::text(SYSTEM_PROMPT)]),
            Message::user_text("What is the balance of my checking account?"),
            Message::new(
                Role::Model,
                vec![Part::tool_request(
                    "getBalance",
                    None,
                    Some(json!({"account": "checking"})),
                )],
            ),
            Message::new(
                Role::Tool,
                vec![Part::tool_response(
                    "getBalance",
                    None,
                    Some(json!({"account": "checking", "balance": 1250.0})),
                )],
            ),
        ]);
        request.tools = banking_tools().into();
        request.config = Some(json!({"maxOutputTokens": 64}));
        let response = model.generate(request, ChunkSink::none()).await.unwrap();
        println!(
            "answer after a tool result: {:?} ({})",
            response.text(),
            timings(&response)
        );
        let message = response.message.clone().unwrap();
        assert_eq!(message.tool_requests().count(), 0, "{message:?}");
        assert!(!response.text().trim().is_empty());
    }
}
