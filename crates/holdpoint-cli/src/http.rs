//! A holdpoint server as a backend: the routes of `holdpoint-server`,
//! called through [`holdpoint_client`], with its errors said the way the
//! CLI says them (what to check, `--server`, `--api-key`).
//!
//! A command that names no agent asks every agent the caller may use, in
//! the server's order; a 404 from one of them means "not this one".

use holdpoint::Resume;
use holdpoint::agent::{AgentInit, AgentInput, AgentOutput, Answer, PendingApproval};
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::{AuditRecord, Snapshot};
use holdpoint_client::{
    AnswerOutcome, AuditFilter, Client, ClientError, ListQuery, Notification, NotificationQuery, NotificationsPage,
};

use crate::error::CliError;

/// A server at `base`, called with an optional API key.
pub struct HttpBackend {
    base: String,
    client: Client,
}

/// Which snapshot to read: by its id, or a session's latest.
#[derive(Clone, Copy)]
enum Key<'a> {
    Snapshot(&'a str),
    Session(&'a str),
}

impl HttpBackend {
    /// A backend for the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, api_key: Option<String>) -> Self {
        let base = base.trim_end_matches('/').to_owned();
        let mut client = Client::new(base.clone());
        if let Some(key) = api_key {
            client = client.api_key(key);
        }
        HttpBackend { base, client }
    }

    /// A failed call as the CLI reports it. A 404 is [`CliError::NotFound`]
    /// with the server's message; a 401 adds how to pass a key.
    fn error(&self, error: ClientError) -> CliError {
        match error {
            ClientError::Transport { message, .. } => CliError::Server(format!(
                "cannot reach {}: {message} (is the server running? check --server)",
                self.base
            )),
            ClientError::Server { http: 404, message, .. } => CliError::NotFound(message),
            ClientError::Server { http, message, .. } => {
                let hint = if http == 401 {
                    " (pass --api-key or set HOLDPOINT_API_KEY)"
                } else {
                    ""
                };
                let status = reqwest::StatusCode::from_u16(http)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| http.to_string());
                CliError::Server(format!("{status}: {message}{hint}"))
            }
            other => CliError::Server(other.to_string()),
        }
    }

    /// A call's result, `None` for a 404 (to try the next agent, or to say
    /// what was not found in the command's words).
    fn found<T>(&self, result: holdpoint_client::Result<T>) -> Result<Option<T>, CliError> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(ClientError::Server { http: 404, .. }) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The agents to look at: `only`, or every agent the caller may use.
    async fn agents(&self, only: Option<&str>) -> Result<Vec<String>, CliError> {
        if let Some(name) = only {
            return Ok(vec![name.to_owned()]);
        }
        self.found(self.client.agents().await)?
            .ok_or_else(|| CliError::Server(format!("{} has no /agents route: is it a holdpoint server?", self.base)))
    }

    /// The snapshot `key` names, from the first agent that knows it.
    async fn find_snapshot(&self, key: Key<'_>, agent: Option<&str>) -> Result<Option<Snapshot>, CliError> {
        for name in self.agents(agent).await? {
            let remote = self.client.agent(name.clone());
            let read = match key {
                Key::Snapshot(id) => remote.snapshot(id).await,
                Key::Session(id) => remote.latest_snapshot(id).await,
            };
            if let Some(mut s) = self.found(read)? {
                s.agent.get_or_insert(name);
                return Ok(Some(s));
            }
        }
        Ok(None)
    }

    /// The snapshot `id`, from the first agent that knows it.
    pub async fn snapshot(&self, id: &str, agent: Option<&str>) -> Result<Option<Snapshot>, CliError> {
        self.find_snapshot(Key::Snapshot(id), agent).await
    }

    /// The latest snapshot of `session`, from the first agent that knows it.
    pub async fn latest_snapshot(&self, session: &str, agent: Option<&str>) -> Result<Option<Snapshot>, CliError> {
        self.find_snapshot(Key::Session(session), agent).await
    }

    /// Aborts `snapshot`; the status it had.
    pub async fn abort(&self, snapshot: &str, agent: Option<&str>) -> Result<Option<String>, CliError> {
        for name in self.agents(agent).await? {
            if let Some(aborted) = self.found(self.client.agent(name).abort(snapshot).await)? {
                let previous = aborted.previous_status.or(aborted.status);
                return Ok(Some(previous.map_or("unknown", |s| s.as_str()).to_owned()));
            }
        }
        Ok(None)
    }

    /// Paused calls of every agent (or `agent`'s).
    pub async fn pending(&self, agent: Option<&str>, limit: usize) -> Result<Vec<PendingApproval>, CliError> {
        let mut all = Vec::new();
        for name in self.agents(agent).await? {
            if let Some(items) = self.found(self.client.agent(name).pending(limit).await)? {
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
            let listed = self.client.agent(name).in_doubt(ListQuery::new().limit(limit)).await;
            if let Some(items) = self.found(listed)? {
                all.extend(items);
            }
        }
        all.sort_by_key(|p| std::cmp::Reverse(p.held_since));
        all.truncate(limit);
        Ok(all)
    }

    /// Settles calls of `snapshot` left in doubt; the settled turn's output
    /// (a failed one included).
    pub async fn settle(&self, agent: &str, snapshot: &str, resume: Resume) -> Result<AgentOutput, CliError> {
        let settled = failed_as_output(self.client.agent(agent).settle(snapshot, resume).await);
        self.found(settled)?
            .ok_or_else(|| CliError::NotFound(format!("snapshot {snapshot} not found on agent {agent}")))
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
        let mut filter = AuditFilter::new().limit(limit);
        if let Some(agent) = agent {
            filter = filter.agent(agent);
        }
        if let Some(session) = session {
            filter = filter.session(session);
        }
        match self.found(self.client.audit(filter).await)? {
            Some(page) => Ok(page.items),
            None => Err(CliError::NotFound(match agent {
                Some(a) => format!("agent {a} not found"),
                None => "no audit on this server".into(),
            })),
        }
    }

    /// Approves or denies one paused call as the caller (`POST
    /// /agents/{name}/answer`): the server checks the call's approval
    /// rule, records an approval short of the quorum, and resumes the
    /// session once the hold is decided (a failed turn is
    /// [`AnswerOutcome::Resumed`] too). `None` when the agent does not
    /// know the snapshot or the caller may not answer it.
    pub async fn answer(&self, agent: &str, answer: Answer) -> Result<Option<AnswerOutcome>, CliError> {
        let answered = match self.client.agent(agent).answer(answer).await {
            Err(ClientError::TurnFailed(out)) => Ok(AnswerOutcome::Resumed(out)),
            other => other,
        };
        self.found(answered)
    }

    /// Resumes `snapshot` of `agent` with `resume`; the resumed turn's
    /// output (a failed one included).
    pub async fn resume(&self, agent: &str, snapshot: &str, resume: Resume) -> Result<AgentOutput, CliError> {
        let run = self
            .client
            .agent(agent)
            .run(AgentInput::resume(resume), AgentInit::snapshot(snapshot))
            .await;
        self.found(failed_as_output(run))?
            .ok_or_else(|| CliError::NotFound(format!("snapshot {snapshot} not found on agent {agent}")))
    }

    /// The standing grants the caller may manage; `None` when the server
    /// lists none (404).
    pub async fn grants(&self, query: GrantQuery) -> Result<Option<Vec<Grant>>, CliError> {
        self.found(self.client.grants(query).await)
    }

    /// Revokes grant `id`; `None` when the caller may not manage it (404).
    pub async fn revoke_grant(&self, id: &str) -> Result<Option<Grant>, CliError> {
        self.found(self.client.revoke_grant(id).await)
    }

    /// One page of the notification outbox (the `operator` role).
    pub async fn notifications(&self, query: NotificationQuery) -> Result<NotificationsPage, CliError> {
        self.client.notifications(query).await.map_err(|e| self.error(e))
    }

    /// Makes notification `id` due again.
    pub async fn retry_notification(&self, id: &str) -> Result<Notification, CliError> {
        self.client.retry_notification(id).await.map_err(|e| self.error(e))
    }

    /// Re-enables the stopped endpoint of `channel`.
    pub async fn enable_endpoint(&self, channel: &str) -> Result<(), CliError> {
        self.client.enable_endpoint(channel).await.map_err(|e| self.error(e))
    }
}

/// A failed turn's output as an output: the command prints it (and exits
/// non-zero), as with a store.
fn failed_as_output(result: holdpoint_client::Result<AgentOutput>) -> holdpoint_client::Result<AgentOutput> {
    match result {
        Err(ClientError::TurnFailed(out)) => Ok(*out),
        other => other,
    }
}
