//! One agent of a server: the routes of `holdpoint-server` under
//! `/agents/{name}`.

use holdpoint::Status;
use holdpoint::agent::{AgentInit, AgentInput, AgentOutput};
use holdpoint::session::{Snapshot, SnapshotStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::{Client, Layout, server_error};
use crate::connection::RemoteConnection;
use crate::error::{ClientError, Result, fail_loudly};
use crate::stream::TurnStream;

/// What an abort did.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Aborted {
    /// The snapshot the abort targeted.
    pub snapshot_id: String,
    /// Its status after the abort (`holdpoint-server`); Genkit JS answers
    /// the status *before* the abort here and no `previousStatus`, and no
    /// status for an unknown snapshot.
    #[serde(default)]
    pub status: Option<SnapshotStatus>,
    /// Its status before (`holdpoint-server` only).
    #[serde(default)]
    pub previous_status: Option<SnapshotStatus>,
}

/// An agent served over HTTP. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RemoteAgent {
    pub(crate) client: Client,
    name: String,
}

impl Client {
    /// The agent served under `name`.
    pub fn agent(&self, name: impl Into<String>) -> RemoteAgent {
        RemoteAgent {
            client: self.clone(),
            name: name.into(),
        }
    }
}

impl RemoteAgent {
    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn path(&self, tail: &str) -> String {
        match &self.client.layout {
            Layout::Holdpoint => format!("/agents/{}{tail}", self.name),
            Layout::Genkit { prefix } => format!("{prefix}/{}{tail}", self.name),
        }
    }

    /// Runs one turn from `init` and waits for its output. A failed turn
    /// is [`ClientError::TurnFailed`]; a resume that lost the exactly-once
    /// claim is a server error with status `ABORTED` (HTTP 409).
    ///
    /// An approver answers a hold that [`pending`](Self::pending) listed in
    /// someone else's session with [`answer`](Self::answer) (or
    /// [`approve`](Self::approve) / [`deny`](Self::deny)), not with a
    /// resume: the owner's session is not found by its id for anyone else
    /// (`NOT_FOUND`, whose message here says so), and a resume by the
    /// snapshot id cannot meet a quorum above one (a failed turn,
    /// `FAILED_PRECONDITION`).
    pub async fn run(&self, input: AgentInput, init: AgentInit) -> Result<AgentOutput> {
        let resuming = input.resume.is_some();
        let body = json!({"data": input, "init": init});
        let out: AgentOutput = self
            .client
            .call(&self.path(""), &body)
            .await
            .map_err(|e| self.explain_resume(e, resuming))?;
        fail_loudly(out)
    }

    /// A resume answered `NOT_FOUND`, said with the approver's way: the
    /// server's 404 does not tell a session the caller may not see from a
    /// hold in it the caller may answer, so the client names both.
    fn explain_resume(&self, error: ClientError, resuming: bool) -> ClientError {
        match error {
            ClientError::Server {
                http,
                status: Status::NotFound,
                message,
            } if resuming && self.client.layout == Layout::Holdpoint => ClientError::Server {
                http,
                status: Status::NotFound,
                message: format!(
                    "{message}: an approver does not see the owner's session by its id; it answers a hold \
                     it was listed in someone else's session with RemoteAgent::answer, approve or deny \
                     (POST /agents/{}/answer)",
                    self.name
                ),
            },
            other => other,
        }
    }

    /// Starts a new conversation with one user message.
    pub async fn run_text(&self, text: &str) -> Result<AgentOutput> {
        self.run(AgentInput::text(text), AgentInit::new()).await
    }

    /// Runs one turn and streams it (server-sent events): the chunks as
    /// they come, then the output.
    pub async fn stream(&self, input: AgentInput, init: AgentInit) -> Result<TurnStream> {
        let url = self.client.url(&self.path("?stream=true"));
        let resuming = input.resume.is_some();
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
            return Err(self.explain_resume(server_error(&url, http.as_u16(), &bytes), resuming));
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
        if let Layout::Genkit { .. } = self.client.layout {
            return self.poll_for_snapshot(snapshot_id, timeout_ms.unwrap_or(30_000)).await;
        }
        let mut data = json!({"snapshotId": snapshot_id});
        if let Some(ms) = timeout_ms {
            data["timeoutMs"] = Value::from(ms);
        }
        self.client
            .call(&self.path("/waitForSnapshot"), &json!({ "data": data }))
            .await
    }

    /// Genkit JS serves no `waitForSnapshot`: read the snapshot every
    /// 100 ms until it settles or `timeout_ms` passes (then it is returned
    /// as it is).
    async fn poll_for_snapshot(&self, snapshot_id: &str, timeout_ms: u64) -> Result<Snapshot> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
        loop {
            let snap = self.snapshot(snapshot_id).await?;
            let busy = matches!(snap.status, SnapshotStatus::Pending | SnapshotStatus::Aborting);
            if !busy || tokio::time::Instant::now() >= deadline {
                return Ok(snap);
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}
