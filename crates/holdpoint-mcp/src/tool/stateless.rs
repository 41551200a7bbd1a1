//! A stateless `input_required` result: its interrupt, and the resume that
//! sends `tools/call` again with the answers and the echoed `requestState`.

use holdpoint::tool::ToolOutcome;
use holdpoint::{Error, Result};
use serde_json::{Map, Value, json};

use super::McpTool;
use crate::answer::{self, Answer, Answers, INPUT_REQUIRED, MCP_KEY};

impl McpTool {
    /// The interrupt of a stateless `input_required` result.
    pub(super) fn input_required(&self, result: &Value) -> ToolOutcome {
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if requests.is_empty() {
            return self.fail("the server asked for input without saying which");
        }
        let mut messages = Vec::new();
        for (key, req) in &requests {
            if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
                let method = req.get("method").and_then(Value::as_str).unwrap_or("?");
                return self.fail(format!(
                    "the server asked for `{method}` (input request \"{key}\"), which Holdpoint does not provide"
                ));
            }
            if let Some(m) = req.pointer("/params/message").and_then(Value::as_str) {
                messages.push(m.to_owned());
            }
        }
        let mut mcp = Map::new();
        mcp.insert("type".into(), Value::String(INPUT_REQUIRED.into()));
        mcp.insert("server".into(), Value::String(self.server().to_owned()));
        mcp.insert("tool".into(), Value::String(self.mcp_name.clone()));
        mcp.insert("inputRequests".into(), Value::Object(requests));
        if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
            mcp.insert("requestState".into(), state.clone());
        }
        let mut data = Map::new();
        data.insert("message".into(), Value::String(messages.join("\n")));
        data.insert(MCP_KEY.into(), Value::Object(mcp));
        ToolOutcome::Interrupt(data)
    }

    /// Retries a stateless call with the answers; a bad answer asks again.
    pub(super) async fn answer_stateless(
        &self,
        paused: &Map<String, Value>,
        part: &Map<String, Value>,
        resumed: &Map<String, Value>,
        input: Value,
    ) -> Result<ToolOutcome> {
        let requests = part
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let answers = match Answers::parse(resumed).map_err(Error::InvalidArgument)? {
            Answers::ByKey(m) => m,
            Answers::One(a) if requests.len() == 1 => requests.keys().map(|k| (k.clone(), a.clone())).collect(),
            Answers::One(_) => {
                return Err(Error::InvalidArgument(format!(
                    "the server asked {} questions; answer each under `responses` by key ({})",
                    requests.len(),
                    requests.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        };
        let mut problems = Vec::new();
        let mut responses = Map::new();
        for (key, req) in &requests {
            let Some(answer) = answers.get(key) else {
                problems.push(format!("no answer for \"{key}\""));
                continue;
            };
            let url = req.pointer("/params/mode").and_then(Value::as_str) == Some("url");
            if url {
                if matches!(answer, Answer::Accept(Some(_))) {
                    problems.push(format!("\"{key}\": a URL-mode question's accept carries no content"));
                }
            } else {
                let schema = req
                    .pointer("/params/requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"}));
                if let Err(e) = answer::check_content(&schema, answer) {
                    problems.push(format!("\"{key}\": {e}"));
                }
            }
            responses.insert(key.clone(), answer.to_result());
        }
        if let Some(extra) = answers.keys().find(|k| !requests.contains_key(*k)) {
            problems.push(format!("\"{extra}\" was not asked"));
        }
        if !problems.is_empty() {
            let mut data = paused.clone();
            data.insert("error".into(), Value::String(problems.join("; ")));
            return Ok(ToolOutcome::Interrupt(data));
        }
        let state = part.get("requestState").and_then(Value::as_str).map(str::to_owned);
        Ok(self.send(input, Some((Value::Object(responses), state))).await)
    }
}
