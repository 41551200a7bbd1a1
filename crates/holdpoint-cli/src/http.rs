//! A holdpoint server as a backend: the routes of `holdpoint-server`.

use holdpoint::Resume;
use holdpoint::agent::{AgentOutput, Answer, PendingApproval};
use holdpoint::session::{AuditRecord, HoldApproval, Snapshot};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::backend::Outcome;
use crate::error::CliError;

/// A server at `base`, called with an optional API key.
pub struct HttpBackend {
    base: String,
    api_key: Option<String>,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct AgentInfo {
    name: String,
}

/// The result of `POST /agents/{name}/answer`.
#[derive(Deserialize)]
struct AnswerReply {
    #[serde(default)]
    counted: Option<bool>,
    #[serde(default)]
    quorum: Option<u32>,
    #[serde(default)]
    approvals: Option<Vec<HoldApproval>>,
    #[serde(default)]
    output: Option<AgentOutput>,
}

/// What a call came back with: a result, or a 404 (to try the next agent).
enum Reply<T> {
    Found(T),
    NotFound,
}

impl HttpBackend {
    /// A backend for the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, api_key: Option<String>) -> Self {
        HttpBackend {
            base: base.trim_end_matches('/').to_owned(),
            api_key,
            client: reqwest::Client::new(),
        }
    }

    /// A request to `path` on the server, with the API key.
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.client.request(method, format!("{}{path}", self.base));
        match &self.api_key {
            Some(key) => req.header("X-API-Key", key),
            None => req,
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply<T>, CliError> {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.api_key {
            req = req.header("X-API-Key", key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.map_err(|e| {
            CliError::Server(format!(
                "cannot reach {}: {e} (is the server running? check --server)",
                self.base
            ))
        })?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| CliError::Server(format!("{path} answered {status} without JSON: {e}")))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Reply::NotFound);
        }
        if let Some(err) = body.get("error") {
            let message = err.get("message").and_then(Value::as_str).unwrap_or("no message");
            let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
                " (pass --api-key or set HOLDPOINT_API_KEY)"
            } else {
                ""
            };
            return Err(CliError::Server(format!("{status}: {message}{hint}")));
        }
        let result = body.get("result").cloned().unwrap_or(Value::Null);
        serde_json::from_value(result)
            .map(Reply::Found)
            .map_err(|e| CliError::Server(format!("{path}: unexpected answer: {e}")))
    }

    /// A call's `result` as JSON, `None` on 404 (for commands kept in
    /// files of their own).
    pub(crate) async fn result(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Option<Value>, CliError> {
        Ok(match self.call::<Value>(method, path, body).await? {
            Reply::Found(v) => Some(v),
            Reply::NotFound => None,
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<Reply<T>, CliError> {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: Value) -> Result<Reply<T>, CliError> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// The agents to look at: `only`, or every agent the caller may use.
    async fn agents(&self, only: Option<&str>) -> Result<Vec<String>, CliError> {
        if let Some(name) = only {
            return Ok(vec![name.to_owned()]);
        }
        match self.get::<Vec<AgentInfo>>("/agents").await? {
            Reply::Found(list) => Ok(list.into_iter().map(|a| a.name).collect()),
            Reply::NotFound => Err(CliError::Server(format!(
                "{} has no /agents route: is it a holdpoint server?",
                self.base
            ))),
        }
    }

    /// A snapshot by `{"snapshotId"}` or `{"sessionId"}`, from the first
    /// agent that knows it.
    pub async fn snapshot(&self, query: Value, agent: Option<&str>) -> Result<Option<Snapshot>, CliError> {
        for name in self.agents(agent).await? {
            let path = format!("/agents/{name}/getSnapshot");
            if let Reply::Found(mut s) = self.post::<Snapshot>(&path, json!({ "data": query })).await? {
                s.agent.get_or_insert(name);
                return Ok(Some(s));
            }
        }
        Ok(None)
    }

    /// Aborts `snapshot`; the status it had.
    pub async fn abort(&self, snapshot: &str, agent: Option<&str>) -> Result<Option<String>, CliError> {
        for name in self.agents(agent).await? {
            let path = format!("/agents/{name}/abort");
            if let Reply::Found(v) = self
                .post::<Value>(&path, json!({ "data": { "snapshotId": snapshot } }))
                .await?
            {
                let previous = v.get("previousStatus").or_else(|| v.get("status"));
                return Ok(Some(previous.and_then(Value::as_str).unwrap_or("unknown").to_owned()));
            }
        }
        Ok(None)
    }

    /// Paused calls of every agent (or `agent`'s).
    pub async fn pending(&self, agent: Option<&str>, limit: usize) -> Result<Vec<PendingApproval>, CliError> {
        let mut all = Vec::new();
        for name in self.agents(agent).await? {
            if let Reply::Found(items) = self
                .get::<Vec<PendingApproval>>(&format!("/agents/{name}/pending?limit={limit}"))
                .await?
            {
                all.extend(items);
            }
        }
        all.sort_by_key(|p| std::cmp::Reverse(p.held_since));
        all.truncate(limit);
        Ok(all)
    }

    /// Calls in doubt of every agent (or `agent`'s).
    pub async fn in_doubt(&self, agent: Option<&str>, limit: usize) -> Result<Vec<PendingApproval>, CliError> {
        let mut all = Vec::new();
        for name in self.agents(agent).await? {
            if let Reply::Found(items) = self
                .get::<Vec<PendingApproval>>(&format!("/agents/{name}/inDoubt?limit={limit}"))
                .await?
            {
                all.extend(items);
            }
        }
        all.sort_by_key(|p| std::cmp::Reverse(p.held_since));
        all.truncate(limit);
        Ok(all)
    }

    /// Settles calls of `snapshot` left in doubt; the settled turn's output.
    pub async fn settle(&self, agent: &str, snapshot: &str, resume: Resume) -> Result<AgentOutput, CliError> {
        let body = json!({ "data": { "snapshotId": snapshot, "resume": resume } });
        match self
            .post::<AgentOutput>(&format!("/agents/{agent}/settle"), body)
            .await?
        {
            Reply::Found(out) => Ok(out),
            Reply::NotFound => Err(CliError::NotFound(format!(
                "snapshot {snapshot} not found on agent {agent}"
            ))),
        }
    }

    /// Decisions of every agent (or `agent`'s) that the caller made or that
    /// were made on its behalf (`GET /audit`: an approver sees the
    /// decisions it took on others' sessions), newest first.
    pub async fn audit(
        &self,
        agent: Option<&str>,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, CliError> {
        #[derive(Deserialize)]
        struct Page {
            items: Vec<AuditRecord>,
        }
        let mut path = format!("/audit?limit={limit}");
        if let Some(agent) = agent {
            path.push_str(&format!("&agent={agent}"));
        }
        if let Some(session) = session {
            path.push_str(&format!("&sessionId={session}"));
        }
        match self.get::<Page>(&path).await? {
            Reply::Found(page) => Ok(page.items),
            Reply::NotFound => Err(CliError::NotFound(match agent {
                Some(a) => format!("agent {a} not found"),
                None => "no audit on this server".into(),
            })),
        }
    }

    /// Resumes `snapshot` of `agent` with `resume`; the resumed turn's output.
    /// Approves or denies one paused call as the caller
    /// (`POST /agents/{name}/answer`): the server checks the call's
    /// approval rule, records an approval short of the quorum, and
    /// resumes the session once the hold is decided.
    pub async fn answer(&self, agent: &str, answer: &Answer) -> Result<Outcome, CliError> {
        let body = json!({ "data": answer });
        match self
            .post::<AnswerReply>(&format!("/agents/{agent}/answer"), body)
            .await?
        {
            Reply::Found(AnswerReply { output: Some(out), .. }) => Ok(Outcome::Resumed(Box::new(out))),
            Reply::Found(reply) => Ok(Outcome::Recorded {
                approvals: reply.approvals.unwrap_or_default(),
                quorum: reply.quorum.unwrap_or(1),
                counted: reply.counted.unwrap_or(true),
            }),
            Reply::NotFound => Err(CliError::NotFound(format!(
                "snapshot {} not found on agent {agent} (or not yours to answer)",
                answer.snapshot_id
            ))),
        }
    }

    /// Resumes `snapshot` of `agent` with `resume`.
    pub async fn resume(&self, agent: &str, snapshot: &str, resume: Resume) -> Result<AgentOutput, CliError> {
        let body = json!({ "data": { "resume": resume }, "init": { "snapshotId": snapshot } });
        match self.post::<AgentOutput>(&format!("/agents/{agent}"), body).await? {
            Reply::Found(out) => Ok(out),
            Reply::NotFound => Err(CliError::NotFound(format!(
                "snapshot {snapshot} not found on agent {agent}"
            ))),
        }
    }
}
