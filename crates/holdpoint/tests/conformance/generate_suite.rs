//! Runs generate-format scenarios against the real generate loop.

use std::sync::{Arc, Mutex};

use holdpoint::model::ChunkSink;
use holdpoint::{GenerateChunk, GenerateOptions, GenerateResponse, Message, ScriptedModel, ScriptedTurn, generate};
use serde_json::Value;

use crate::harness;
use crate::matcher::{contains, short};
use crate::report::Report;

fn turns(test: &Value) -> Result<Vec<ScriptedTurn>, String> {
    let responses = test["modelResponses"].as_array().cloned().unwrap_or_default();
    let chunks = test["streamChunks"].as_array().cloned().unwrap_or_default();
    responses
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let response: GenerateResponse =
                serde_json::from_value(r.clone()).map_err(|e| format!("modelResponses[{i}]: {e}"))?;
            let chunks: Vec<GenerateChunk> = match chunks.get(i) {
                Some(c) => serde_json::from_value(c.clone()).map_err(|e| format!("streamChunks[{i}]: {e}"))?,
                None => Vec::new(),
            };
            Ok(ScriptedTurn::response(response).with_chunks(chunks))
        })
        .collect()
}

async fn run_one(test: &Value) -> Result<(), String> {
    let model = ScriptedModel::new("programmableModel");
    model.reset(turns(test)?);
    let input = &test["input"];
    let messages: Vec<Message> =
        serde_json::from_value(input["messages"].clone()).map_err(|e| format!("input.messages: {e}"))?;
    let mut options = GenerateOptions::new(Arc::new(model)).messages(messages);
    if let Some(config) = input.get("config").filter(|c| !c.is_null()) {
        options = options.config(config.clone());
    }
    let mut tools = Vec::new();
    for name in input["tools"].as_array().cloned().unwrap_or_default() {
        match name.as_str() {
            Some("testTool") => tools.push(harness::test_tool()),
            Some("interruptTool") => tools.push(harness::interrupt_tool()),
            Some("restartTool") => tools.push(harness::restart_tool()),
            other => return Err(format!("unknown harness tool {other:?}")),
        }
    }
    options = options.tools(tools);
    let collected: Arc<Mutex<Vec<GenerateChunk>>> = Arc::default();
    let stream = test["stream"].as_bool().unwrap_or(false) || test.get("expectChunks").is_some();
    if stream {
        let sink = Arc::clone(&collected);
        options = options.chunks(ChunkSink::new(move |c| {
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        }));
    }
    let generation = generate(options).await.map_err(|e| format!("generate failed: {e}"))?;
    let actual = serde_json::to_value(&generation.response).map_err(|e| e.to_string())?;
    if let Some(expected) = test.get("expectResponse") {
        contains(&actual, expected, "response")?;
    }
    if let Some(Value::Array(expected)) = test.get("expectChunks") {
        let chunks = collected.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let actual = serde_json::to_value(&chunks).map_err(|e| e.to_string())?;
        let actual = actual.as_array().cloned().unwrap_or_default();
        if actual.len() != expected.len() {
            return Err(format!(
                "expected {} chunks, got {}: {}",
                expected.len(),
                actual.len(),
                short(&Value::Array(actual))
            ));
        }
        for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
            contains(a, e, &format!("chunk[{i}]"))?;
        }
    }
    Ok(())
}

/// Runs every scenario of a generate-format document.
pub async fn run(doc: &Value, report: &mut Report) {
    for test in doc["tests"].as_array().cloned().unwrap_or_default() {
        let name = test["name"].as_str().unwrap_or("(unnamed)").to_owned();
        let result = run_one(&test).await;
        report.record(&name, result);
    }
}
