//! One `tools/call` in flight: sending it, the server's questions routed
//! to it, and the calls held on a question until a resume.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use crate::error::McpError;

/// A server's question, routed to the open call it belongs to.
pub(crate) struct Question {
    /// The `elicitation/create` params (`mode`, `message`, `requestedSchema` or `url`).
    pub params: Value,
    /// Where the `ElicitResult` goes; dropping it answers `cancel`.
    pub reply: oneshot::Sender<Value>,
}

/// What a `tools/call` came back with.
pub(crate) enum Reply {
    /// A `CallToolResult`, as JSON.
    Complete(Value),
    /// An `InputRequiredResult` (2026-07-28), as JSON.
    InputRequired(Value),
}

/// One open `tools/call`. Dropping it abandons the request (the server is
/// sent `notifications/cancelled`) and takes it out of `inflight`.
pub(crate) struct LiveCall {
    seq: u64,
    shared: Weak<Shared>,
    pub tool: String,
    pub done: oneshot::Receiver<Result<Reply, String>>,
    pub questions: mpsc::Receiver<Question>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(shared) = self.shared.upgrade() {
            shared.inflight().remove(&self.seq);
        }
    }
}

/// A call held on the server's question, waiting for a resume.
pub(crate) struct Held {
    pub call: LiveCall,
    pub reply: oneshot::Sender<Value>,
    /// The interrupt data the call paused with.
    pub data: Map<String, Value>,
    pub since: Instant,
}

impl Shared {
    /// Sends `tools/call` and returns the open call.
    pub(crate) async fn start_call(
        self: &Arc<Self>,
        tool: &str,
        arguments: Map<String, Value>,
        retry: Option<(Value, Option<String>)>,
    ) -> Result<LiveCall, McpError> {
        self.sweep_held();
        let conn = self.connection().await?;
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some((responses, state)) = retry {
            params["inputResponses"] = responses;
            if let Some(state) = state {
                params["requestState"] = Value::String(state);
            }
        }
        let params: CallToolRequestParams = serde_json::from_value(params)
            .map_err(|e| self.request_error(format!("cannot build the tools/call request: {e}")))?;
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let (qtx, questions) = mpsc::channel(1);
        self.inflight().insert(seq, qtx);
        let (dtx, done) = oneshot::channel();
        let peer = conn.service.peer().clone();
        let server = self.config.name.clone();
        let task = tokio::spawn(async move {
            // Holding the connection keeps the service (and its process)
            // up for as long as the call is open.
            let _conn = conn;
            let reply = match peer.call_tool_once(params).await {
                Ok(CallToolResponse::Complete(r)) => {
                    serde_json::to_value(&r).map(Reply::Complete).map_err(|e| e.to_string())
                }
                Ok(CallToolResponse::InputRequired(r)) => serde_json::to_value(&r)
                    .map(Reply::InputRequired)
                    .map_err(|e| e.to_string()),
                Ok(_) => Err("the server answered with a task, which Holdpoint does not poll".to_owned()),
                Err(rmcp::ServiceError::TransportClosed) => Err(format!(
                    "MCP server \"{server}\" closed the connection during the call; its outcome is unknown"
                )),
                Err(e) => Err(format!("MCP server \"{server}\": {e}")),
            };
            let _ = dtx.send(reply);
        });
        Ok(LiveCall {
            seq,
            shared: Arc::downgrade(self),
            tool: tool.to_owned(),
            done,
            questions,
            task,
        })
    }

    /// Routes a server's question to the one open call, and waits for its
    /// answer (`cancel` when there is no single open call, when the held
    /// call is dropped, or after the elicitation timeout).
    pub(super) async fn route_question(&self, params: Value) -> Value {
        let cancel = json!({"action": "cancel"});
        let target = {
            let open = self.inflight();
            if open.len() == 1 {
                open.values().next().cloned()
            } else {
                None
            }
        };
        let Some(target) = target else {
            tracing::warn!(
                server = %self.config.name,
                "the server asked a question while no single call of it was open; answered cancel"
            );
            return cancel;
        };
        let (reply, answer) = oneshot::channel();
        if target.send(Question { params, reply }).await.is_err() {
            return cancel;
        }
        match tokio::time::timeout(self.config.elicitation_timeout(), answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => cancel,
            Err(_) => {
                tracing::warn!(server = %self.config.name, "a question of the server was not answered in time; answered cancel");
                cancel
            }
        }
    }

    /// Drops held calls whose question is closed (answered `cancel` on
    /// timeout) and that waited longer than the elicitation timeout.
    pub(crate) fn sweep_held(&self) {
        let limit = self.config.elicitation_timeout();
        self.held()
            .retain(|_, h| !(h.reply.is_closed() && h.since.elapsed() > limit));
    }
}
