//! One agent of a server: the routes of `holdpoint-server` under
//! `/agents/{name}`.

use holdpoint::FinishReason;
use holdpoint::agent::{AgentInit, AgentInput, AgentOutput, PendingApproval};
use holdpoint::session::{Snapshot, SnapshotStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::{Client, server_error};
use crate::connection::RemoteConnection;
use crate::error::{ClientError, Result};
use crate::stream::TurnStream;

/// What an abort did.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Aborted {
    /// The snapshot the abort targeted.
    pub snapshot_id: String,
    /// Its status after the abort.
    pub status: SnapshotStatus,
    /// Its status before.
    pub previous_status: SnapshotStatus,
}

/// An agent served over HTTP. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RemoteAgent {
    client: Client,
    name: String,
}

/// A failed turn is an `Err`, as in process.
pub(crate) fn fail_loudly(out: AgentOutput) -> Result<AgentOutput> {
    if out.finish_reason == FinishReason::Failed {
        return Err(ClientError::TurnFailed(Box::new(out)));
    }
    Ok(out)
}

impl RemoteAgent {
    pub(crate) fn new(client: Client, name: String) -> Self {
        RemoteAgent { client, name }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn path(&self, tail: &str) -> String {
        format!("/agents/{}{tail}", self.name)
    }

    /// Runs one turn from `init` and waits for its output. A failed turn
    /// is [`ClientError::TurnFailed`]; a resume that lost the exactly-once
    /// claim is a server error with status `ABORTED` (HTTP 409).
    pub async fn run(&self, input: AgentInput, init: AgentInit) -> Result<AgentOutput> {
        let body = json!({"data": input, "init": init});
        let out: AgentOutput = self.client.call(&self.path(""), &body).await?;
        fail_loudly(out)
    }

    /// Starts a new conversation with one user message.
    pub async fn run_text(&self, text: &str) -> Result<AgentOutput> {
        self.run(AgentInput::text(text), AgentInit::new()).await
    }

    /// Runs one turn and streams it (server-sent events): the chunks as
    /// they come, then the output.
    pub async fn stream(&self, input: AgentInput, init: AgentInit) -> Result<TurnStream> {
        let url = self.client.url(&self.path("?stream=true"));
        let body = json!({"data": input, "init": init});
        let response = self
            .client
            .authorise(self.client.http.post(&url).json(&body))
            .header("Accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| ClientError::transport(&url, e))?;
        let http = response.status();
        if !http.is_success() {
            let bytes = response.bytes().await.unwrap_or_default();
            return Err(server_error(&url, http.as_u16(), &bytes));
        }
        Ok(TurnStream::new(url, response))
    }

    /// Opens a multi-turn WebSocket connection starting at `init`.
    pub async fn connect(&self, init: AgentInit) -> Result<RemoteConnection> {
        RemoteConnection::open(&self.client, &self.path("/connect"), init).await
    }

    /// The snapshot `snapshot_id` (404 for another principal's).
    pub async fn snapshot(&self, snapshot_id: &str) -> Result<Snapshot> {
        let body = json!({"data": {"snapshotId": snapshot_id}});
        self.client.call(&self.path("/getSnapshot"), &body).await
    }

    /// The latest snapshot of session `session_id`.
    pub async fn latest_snapshot(&self, session_id: &str) -> Result<Snapshot> {
        let body = json!({"data": {"sessionId": session_id}});
        self.client.call(&self.path("/getSnapshot"), &body).await
    }

    /// Aborts the detached run writing `snapshot_id` (a settled snapshot
    /// keeps its status).
    pub async fn abort(&self, snapshot_id: &str) -> Result<Aborted> {
        let body = json!({"data": {"snapshotId": snapshot_id}});
        self.client.call(&self.path("/abort"), &body).await
    }

    /// Waits (bounded by the server, and by `timeout_ms` when given) until
    /// `snapshot_id` leaves `pending`/`aborting`, and returns it.
    pub async fn wait_for_snapshot(&self, snapshot_id: &str, timeout_ms: Option<u64>) -> Result<Snapshot> {
        let mut data = json!({"snapshotId": snapshot_id});
        if let Some(ms) = timeout_ms {
            data["timeoutMs"] = Value::from(ms);
        }
        self.client
            .call(&self.path("/waitForSnapshot"), &json!({ "data": data }))
            .await
    }

    /// The paused calls of this agent the caller may see, oldest first.
    pub async fn pending(&self, limit: usize) -> Result<Vec<PendingApproval>> {
        let listed: Value = self.client.get(&self.path(&format!("/pending?limit={limit}"))).await?;
        let items = match listed {
            Value::Object(mut map) => map.remove("items").or_else(|| map.remove("result")),
            other => Some(other),
        }
        .unwrap_or(Value::Array(Vec::new()));
        serde_json::from_value(items)
            .map_err(|e| ClientError::protocol(&self.client.url(&self.path("/pending")), e.to_string()))
    }
}
