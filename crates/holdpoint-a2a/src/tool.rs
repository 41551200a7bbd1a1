//! `A2aAgentTool`: a remote A2A agent as a tool (docs/reference.md §21.6).

use std::time::Duration;

use async_trait::async_trait;
use holdpoint::approval::ReplyShape;
use holdpoint::model::ToolDefinition;
use holdpoint::tool::{Tool, ToolCall, ToolOutcome};
use holdpoint::{Error, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::answer::{Reply, reply_shape};
use crate::error::A2aError;
use crate::wire::{self, RpcError, State};

/// The `kind` of the interrupt data of this crate's holds.
pub const INTERRUPT_KIND: &str = "a2a.inputRequired";

/// A remote A2A agent, called as a tool with `{"input": "text"}`.
///
/// A completed task is the output `{"text", "data", "taskId",
/// "contextId"}`; an `input-required` task pauses the call with interrupt
/// data `{"kind": "a2a.inputRequired", "message", "taskId", "contextId",
/// "agentUrl", "question": {"text", "data"}}`, and the restart that
/// answers it (see [`Reply`]) sends the answer on that task.
pub struct A2aAgentTool {
    definition: ToolDefinition,
    url: String,
    headers: HeaderMap,
    client: reqwest::Client,
    poll: Duration,
    wait: Duration,
    reply: ReplyShape,
}

impl A2aAgentTool {
    /// A tool named `name` calling the agent whose JSON-RPC endpoint is
    /// `url` (the `url` of its agent card's JSONRPC interface; for a
    /// Holdpoint server, `…/agents/{name}/a2a`).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        url: impl Into<String>,
    ) -> std::result::Result<Self, A2aError> {
        let url = url.into();
        if let Err(e) = reqwest::Url::parse(&url) {
            return Err(A2aError::Url {
                url,
                message: e.to_string(),
            });
        }
        Ok(A2aAgentTool {
            definition: ToolDefinition {
                name: name.into(),
                description: description.into(),
                input_schema: Some(json!({
                    "type": "object",
                    "properties": {"input": {"type": "string", "description": "What to ask the agent"}},
                    "required": ["input"],
                    "additionalProperties": false,
                })),
                output_schema: None,
                metadata: Some(Map::from_iter([("a2a".to_owned(), json!({"agentUrl": url}))])),
            },
            url,
            headers: HeaderMap::new(),
            client: reqwest::Client::new(),
            poll: Duration::from_millis(250),
            wait: Duration::from_secs(300),
            reply: reply_shape(),
        })
    }

    /// Sends this header with every request.
    pub fn header(mut self, name: &str, value: &str) -> std::result::Result<Self, A2aError> {
        let refuse = |message: String| A2aError::Header {
            name: name.to_owned(),
            message,
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| refuse(e.to_string()))?;
        let mut v = HeaderValue::from_str(value).map_err(|e| refuse(e.to_string()))?;
        v.set_sensitive(true);
        self.headers.insert(n, v);
        Ok(self)
    }

    /// Authenticates with an API key (`x-api-key`).
    pub fn api_key(self, key: &str) -> std::result::Result<Self, A2aError> {
        self.header("x-api-key", key)
    }

    /// Authenticates with a bearer token.
    pub fn bearer(self, token: &str) -> std::result::Result<Self, A2aError> {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// Uses this HTTP client (timeouts, TLS roots, proxies).
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = client;
        self
    }

    /// How long to poll (`GetTask`) a task the agent left running, and how
    /// often (defaults: 300 s, every 250 ms).
    pub fn polling(mut self, wait: Duration, every: Duration) -> Self {
        self.wait = wait;
        self.poll = every;
        self
    }

    /// The agent's JSON-RPC endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn fail(&self, message: impl std::fmt::Display) -> ToolOutcome {
        ToolOutcome::Failed(format!("tool \"{}\": {message}", self.definition.name))
    }

    async fn rpc(&self, method: &str, params: Value) -> std::result::Result<Value, RpcError> {
        wire::call(&self.client, &self.url, &self.headers, method, params).await
    }

    /// Acts on a `SendMessage` result: output, hold, or failure; polls a
    /// task left running.
    async fn settle(&self, mut result: Value) -> ToolOutcome {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let Some(task) = wire::task_of(&result) else {
                // The agent answered with a message, no task.
                let message = result.get("message").unwrap_or(&result);
                let (text, data) = wire::split_parts(message.get("parts"));
                return ToolOutcome::output(json!({"text": text.join("\n"), "data": data}));
            };
            let task_id = task.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let context_id = task
                .get("contextId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match wire::state_of(task) {
                State::Completed { text, data } => {
                    return ToolOutcome::output(json!({
                        "text": text, "data": data, "taskId": task_id, "contextId": context_id,
                    }));
                }
                State::InputRequired { text, data } => {
                    let message = if text.is_empty() {
                        data.iter()
                            .find_map(|d| d.get("message").and_then(Value::as_str))
                            .unwrap_or("the remote agent needs an answer")
                            .to_owned()
                    } else {
                        text.clone()
                    };
                    let interrupt = json!({
                        "kind": INTERRUPT_KIND,
                        "message": message,
                        "taskId": task_id,
                        "contextId": context_id,
                        "agentUrl": self.url,
                        "question": {"text": text, "data": data},
                    });
                    return match interrupt {
                        Value::Object(map) => ToolOutcome::Interrupt(map),
                        _ => self.fail("internal: interrupt data is not an object"),
                    };
                }
                State::Ended { state, message } => {
                    return self.fail(format!("the remote task {task_id} ended {state}: {message}"));
                }
                State::Running => {
                    if task_id.is_empty() || tokio::time::Instant::now() >= deadline {
                        return self.fail(format!("the remote task {task_id:?} did not finish in {:?}", self.wait));
                    }
                    tokio::time::sleep(self.poll).await;
                    result = match self.rpc("GetTask", json!({"id": task_id})).await {
                        Ok(r) => r,
                        Err(e) => return self.fail(e),
                    };
                }
            }
        }
    }

    /// A first call: a new task.
    async fn start(&self, input: &Value) -> ToolOutcome {
        let Some(text) = input.get("input").and_then(Value::as_str) else {
            return self.fail("the input must be {\"input\": \"text\"}");
        };
        match self
            .rpc("SendMessage", wire::message(vec![json!({"text": text})], None))
            .await
        {
            Ok(result) => self.settle(result).await,
            Err(e) => self.fail(e),
        }
    }

    /// The restart that answers a held task.
    async fn answer(&self, paused: &Map<String, Value>, resumed: &Map<String, Value>) -> ToolOutcome {
        let task_id = paused.get("taskId").and_then(Value::as_str).unwrap_or_default();
        let context_id = paused.get("contextId").and_then(Value::as_str).unwrap_or_default();
        let reply = match Reply::parse(resumed) {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let question: Vec<Value> = paused
            .get("question")
            .and_then(|q| q.get("data"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some(parts) = reply.parts(&question) else {
            let reason = match &reply {
                Reply::Deny(Some(r)) => r.clone(),
                _ => "denied".to_owned(),
            };
            return match self.rpc("CancelTask", json!({"id": task_id})).await {
                Ok(_) => self.fail(format!("denied ({reason}); the remote task {task_id} was canceled")),
                Err(e) => self.fail(format!(
                    "denied ({reason}); canceling the remote task {task_id} failed: {e}"
                )),
            };
        };
        match self
            .rpc("SendMessage", wire::message(parts, Some((task_id, context_id))))
            .await
        {
            Ok(result) => self.settle(result).await,
            // Answered already (a restart of this process after the answer
            // reached the agent): read where the task is now.
            Err(e) if e.reason.as_deref() == Some("ALREADY_RESUMED") => {
                match self.rpc("GetTask", json!({"id": task_id})).await {
                    Ok(task) => self.settle(task).await,
                    Err(e) => self.fail(e),
                }
            }
            // Any other refusal: an agent that is not Holdpoint refuses a
            // message to a task that moved on (the A2A SDKs answer
            // `-32004`, the task "is in terminal state") — the answer
            // reached it before a crash of this process. A task that no
            // longer waits goes on from where it is; one that still waits
            // refused this answer, and the call fails with the refusal.
            Err(e) if e.code.is_some() => match self.rpc("GetTask", json!({"id": task_id})).await {
                Ok(task) if !still_waits(&task) => self.settle(task).await,
                _ => self.fail(e),
            },
            Err(e) => self.fail(e),
        }
    }
}

#[async_trait]
impl Tool for A2aAgentTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        let ctx = &call.context;
        let paused = ctx
            .answered_interrupt()
            .filter(|p| p.get("kind").and_then(Value::as_str) == Some(INTERRUPT_KIND));
        let outcome = match (paused, ctx.resumed()) {
            (Some(paused), Some(resumed)) => self.answer(paused, resumed).await,
            _ => self.start(&call.input).await,
        };
        tracing::debug!(tool = %self.definition.name, agent = %self.url, "a2a call ended");
        Ok(outcome)
    }

    fn check_output(&self, _output: &Value) -> Result<()> {
        Ok(())
    }

    fn check_resume(&self, resumed: &Map<String, Value>) -> Result<()> {
        Reply::parse(resumed).map(|_| ()).map_err(Error::InvalidArgument)
    }

    fn approval_reply(&self) -> Option<&ReplyShape> {
        Some(&self.reply)
    }
}

/// Whether a `GetTask` result is a task still waiting for an answer.
fn still_waits(result: &Value) -> bool {
    wire::task_of(result).is_some_and(|task| matches!(wire::state_of(task), State::InputRequired { .. }))
}
