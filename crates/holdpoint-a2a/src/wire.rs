//! A2A 1.0 over JSON-RPC: the three calls this crate makes and how it
//! reads a task (ProtoJSON shapes, `TASK_STATE_*` states).

use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

/// A JSON-RPC error answer, or a transport failure.
#[derive(Debug)]
pub(crate) struct RpcError {
    /// The JSON-RPC error code (`None` for a transport failure).
    pub code: Option<i64>,
    /// The `ErrorInfo` reason, when the peer gave one.
    pub reason: Option<String>,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, &self.reason) {
            (Some(code), Some(reason)) => write!(f, "{} ({code}, {reason})", self.message),
            (Some(code), None) => write!(f, "{} ({code})", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

fn transport(message: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: None,
        reason: None,
        message: message.to_string(),
    }
}

/// One JSON-RPC call; its `result`.
pub(crate) async fn call(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params});
    let response = client
        .post(url)
        .headers(headers.clone())
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .map_err(|e| transport(format!("{method}: {e}")))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| transport(format!("{method}: {e}")))?;
    if !status.is_success() {
        return Err(transport(format!("{method}: HTTP {status}: {}", short(&text))));
    }
    let mut value: Value = serde_json::from_str(&text)
        .map_err(|e| transport(format!("{method}: the answer is not JSON ({e}): {}", short(&text))))?;
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        let reason = error
            .get("data")
            .and_then(Value::as_array)
            .and_then(|d| d.iter().find_map(|i| i.get("reason").and_then(Value::as_str)))
            .map(str::to_owned);
        return Err(RpcError {
            code: error.get("code").and_then(Value::as_i64),
            reason,
            message: format!(
                "{method}: {}",
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the agent refused")
            ),
        });
    }
    match value.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(transport(format!("{method}: the answer has no `result`"))),
    }
}

fn short(s: &str) -> String {
    if s.len() > 200 {
        format!("{}…", &s[..s.floor_char_boundary(200)])
    } else {
        s.to_owned()
    }
}

/// The text and data parts of a list of parts.
pub(crate) fn split_parts(parts: Option<&Value>) -> (Vec<String>, Vec<Value>) {
    let mut text = Vec::new();
    let mut data = Vec::new();
    for part in parts.and_then(Value::as_array).into_iter().flatten() {
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push(t.to_owned());
        } else if let Some(d) = part.get("data") {
            data.push(d.clone());
        }
    }
    (text, data)
}

/// Where a task stands, as this crate acts on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// Finished: the text and data of its artifacts (or its status message).
    Completed { text: String, data: Vec<Value> },
    /// Waits for an answer: the status message's text and data parts.
    InputRequired { text: String, data: Vec<Value> },
    /// Ended without a result (failed, canceled, rejected): why.
    Ended { state: String, message: String },
    /// Still running (submitted or working).
    Running,
}

/// The task of a `SendMessage` result (`{"task"}`, or a bare task), or
/// `None` when the agent answered with a message.
pub(crate) fn task_of(result: &Value) -> Option<&Value> {
    match result.get("task") {
        Some(task) => Some(task),
        None if result.get("status").is_some() => Some(result),
        None => None,
    }
}

/// Reads a task's state.
pub(crate) fn state_of(task: &Value) -> State {
    let status = task.get("status");
    let state = status
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (status_text, status_data) = split_parts(status.and_then(|s| s.get("message")).and_then(|m| m.get("parts")));
    match state
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
        .as_str()
    {
        "completed" => {
            let mut text = Vec::new();
            let mut data = Vec::new();
            for artifact in task.get("artifacts").and_then(Value::as_array).into_iter().flatten() {
                let (t, d) = split_parts(artifact.get("parts"));
                text.extend(t);
                data.extend(d);
            }
            if text.is_empty() && data.is_empty() {
                text = status_text;
                data = status_data;
            }
            State::Completed {
                text: text.join("\n"),
                data,
            }
        }
        "input-required" | "auth-required" => State::InputRequired {
            text: status_text.join("\n"),
            data: status_data,
        },
        "submitted" | "working" | "" => State::Running,
        _ => State::Ended {
            state,
            message: status_text.join("\n"),
        },
    }
}

/// A user message with these parts, on a task when `task` is given.
pub(crate) fn message(parts: Vec<Value>, task: Option<(&str, &str)>) -> Value {
    let mut m = Map::new();
    m.insert("messageId".into(), Value::String(uuid::Uuid::new_v4().to_string()));
    m.insert("role".into(), Value::String("ROLE_USER".into()));
    m.insert("parts".into(), Value::Array(parts));
    if let Some((task_id, context_id)) = task {
        m.insert("taskId".into(), Value::String(task_id.to_owned()));
        if !context_id.is_empty() {
            m.insert("contextId".into(), Value::String(context_id.to_owned()));
        }
    }
    json!({"message": m})
}
