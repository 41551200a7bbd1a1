//! What drives the approval cycle ([`crate::cycle`]): the agent in
//! process, approvers answering a quorum, or the server over loopback HTTP.

use std::time::{Duration, Instant};

use bytes::Bytes;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput};
use holdpoint::message::Role;
use holdpoint::{Error, FinishReason, Part, Resume};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};

use crate::cycle::{Approval, Details, REQUEST, TransferTool, answerable, approver, check};

/// A session paused at the transfer, ready to approve.
pub struct Paused {
    pub session_id: String,
    /// The held snapshot (empty over HTTP, which resumes by session).
    pub snapshot_id: String,
    pub part: Part,
}

/// What drives the cycle: the agent in-process, or the server over
/// loopback HTTP with a keep-alive pool (resuming by session id, as a later
/// request would).
#[derive(Clone)]
pub enum Driver {
    /// `Agent::run` directly.
    Direct(Agent),
    /// `POST {uri}` (`/agents/bankingAgent` on a local server).
    Http(HttpClient),
    /// `Agent::run`, each hold answered through `Decisions::answer` by these
    /// approvers in turn (principals with the `finance` role): every answer
    /// but the last must be recorded as a partial approval, the last must
    /// resume the session to the text `expect`.
    Answered(Answerers),
}

/// The agent and approvers of [`Driver::Answered`].
#[derive(Clone)]
pub struct Answerers {
    agent: Agent,
    approvers: Vec<&'static str>,
    expect: String,
}

impl Answerers {
    /// `approvers` answer each hold of `agent`; the resumed turn must say
    /// `expect`.
    pub fn new(agent: Agent, approvers: Vec<&'static str>, expect: impl Into<String>) -> Self {
        Answerers {
            agent,
            approvers,
            expect: expect.into(),
        }
    }
}

/// The HTTP side of the bench: hyper's client with a keep-alive pool, and
/// the one URI it posts to. Plain hyper rather than reqwest: reqwest parses
/// the URL again for its redirect policy on every request (twice), about a
/// twentieth of the whole run's instructions, on the cores the server
/// under test shares with it.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: http::Uri,
}

impl HttpClient {
    /// A client for `uri` keeping up to `pool` idle connections.
    pub fn new(uri: http::Uri, pool: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(pool)
            .build(connector);
        HttpClient { client, uri }
    }

    /// Posts `body` as JSON; the response's body when its status is 2xx.
    async fn post(&self, body: Vec<u8>) -> holdpoint::Result<Bytes> {
        let uri = &self.uri;
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Internal(format!("POST {uri}: {e}")))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Error::Unavailable(format!("POST {uri}: {e}")))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::Unavailable(format!("POST {uri}: {e}")))?
            .to_bytes();
        if !status.is_success() {
            return Err(Error::Internal(format!(
                "POST {uri}: {status}: {}",
                String::from_utf8_lossy(&bytes)
            )));
        }
        Ok(bytes)
    }
}

/// The body of `POST /agents/{name}`.
#[derive(Serialize)]
struct RunRequest<'a> {
    data: &'a AgentInput,
    init: &'a AgentInit,
}

impl Driver {
    async fn turn(&self, input: AgentInput, init: AgentInit) -> holdpoint::Result<AgentOutput> {
        match self {
            Driver::Direct(agent) | Driver::Answered(Answerers { agent, .. }) => agent.run(input, init).await,
            Driver::Http(http) => {
                let body = serde_json::to_vec(&RunRequest {
                    data: &input,
                    init: &init,
                })
                .map_err(|e| Error::Internal(format!("encode request: {e}")))?;
                let bytes = http.post(body).await?;
                let envelope: ResultEnvelope =
                    serde_json::from_slice(&bytes).map_err(|e| Error::Internal(format!("decode response: {e}")))?;
                Ok(envelope.result)
            }
        }
    }

    /// Starts a session and runs it to the pause.
    pub async fn pause(&self) -> holdpoint::Result<Paused> {
        let mut out = self.turn(AgentInput::text(REQUEST), AgentInit::new()).await?;
        check(out.finish_reason == FinishReason::Interrupted, "turn 1 pauses")?;
        let part = out
            .take_interrupts()
            .into_iter()
            .next()
            .ok_or_else(|| Error::Internal("no interrupt".into()))?;
        Ok(Paused {
            session_id: out.session_id,
            snapshot_id: out.snapshot_id.unwrap_or_default(),
            part: answerable(part),
        })
    }

    /// Reads a paused session's waiting call back from the agent by the
    /// session id alone, as an approval screen does; `None` over HTTP (the
    /// caller keeps the part it got).
    pub async fn reload(&self, session_id: String) -> holdpoint::Result<Option<Paused>> {
        let agent = match self {
            Driver::Direct(agent) | Driver::Answered(Answerers { agent, .. }) => agent,
            Driver::Http(_) => return Ok(None),
        };
        let snapshot = agent
            .latest_snapshot(&session_id, holdpoint::agent::Access::Full)
            .await?
            .ok_or_else(|| Error::Internal(format!("session {session_id} not found")))?;
        let part = snapshot
            .state
            .as_ref()
            .and_then(|s| s.messages.iter().rev().find(|m| m.role == Role::Model))
            .and_then(|m| m.interrupts().next().cloned())
            .ok_or_else(|| Error::Internal(format!("session {session_id} is not waiting")))?;
        Ok(Some(Paused {
            session_id,
            snapshot_id: snapshot.snapshot_id.clone(),
            part: answerable(part),
        }))
    }

    /// Claims and approves a paused session by its id; returns the resume
    /// latency.
    pub async fn approve(&self, tool: &TransferTool, paused: Paused) -> holdpoint::Result<Duration> {
        if let Driver::Answered(answerers) = self {
            return answerers.answer(paused).await;
        }
        let call = tool
            .interrupted_owned(paused.part)
            .ok_or_else(|| Error::Internal("claim refused".into()))?;
        let details: Details = call.interrupt_as()?;
        check(details.details == "Transfer $500.00 to savings", "interrupt payload")?;
        let directive = call.restart(Some(Approval { approved: true }))?;
        let started = Instant::now();
        let done = self
            .turn(
                AgentInput::resume(Resume::from_parts([directive])),
                AgentInit::session(paused.session_id),
            )
            .await?;
        let latency = started.elapsed();
        check(done.finish_reason == FinishReason::Stop, "turn 2 finishes")?;
        check(done.text() == "Done: txn-123", "tool result and final text")?;
        Ok(latency)
    }
}

impl Answerers {
    /// Answers `paused` as each approver in turn; the latency from the
    /// first answer to the resumed turn's end.
    async fn answer(&self, paused: Paused) -> holdpoint::Result<Duration> {
        use holdpoint::agent::{Answer, Answered};
        let started = Instant::now();
        let (last, partial) = self
            .approvers
            .split_last()
            .ok_or_else(|| Error::Internal("no approvers".into()))?;
        for (n, who) in partial.iter().enumerate() {
            let answered = self
                .agent
                .decisions()
                .answer(Answer::approve(&paused.snapshot_id), approver(who))
                .await?;
            let Answered::Recorded { call, counted } = answered else {
                return Err(Error::Internal(format!(
                    "cycle check failed: approval {} resumed early",
                    n + 1
                )));
            };
            check(
                counted && call.approvals.len() == n + 1,
                "the partial approval is recorded",
            )?;
        }
        let answered = self
            .agent
            .decisions()
            .answer(Answer::approve(&paused.snapshot_id), approver(last))
            .await?;
        let latency = started.elapsed();
        let Answered::Resumed(done) = answered else {
            return Err(Error::Internal("cycle check failed: the last approval resumes".into()));
        };
        check(done.finish_reason == FinishReason::Stop, "turn 2 finishes")?;
        check(done.text() == self.expect, "tool result and final text")?;
        Ok(latency)
    }
}

#[derive(Deserialize)]
struct ResultEnvelope {
    result: AgentOutput,
}
