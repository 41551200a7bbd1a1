//! Where commands read and write: a store opened directly (with the
//! registered agents to run resumed turns in-process) or a server over HTTP.

use std::sync::Arc;

use chrono::Utc;
use holdpoint::agent::{Agent, AgentInit, AgentInput, AgentOutput, Answer, AnswerKind, PendingApproval, RunOptions};
use holdpoint::approval::ReplyShape;
use holdpoint::middleware::ToolApproval;
use holdpoint::session::{
    AuditQuery, AuditRecord, HoldApproval, SessionStore, SessionStoreExt, Snapshot, SnapshotQuery,
};
use holdpoint::{Part, Resume};
use holdpoint_client::AnswerOutcome;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::http::HttpBackend;

/// How a paused call is settled.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Run it (an approval gate's hold is approved; a tool's own interrupt
    /// is restarted with `{"approved": true}`).
    Approve(Option<String>),
    /// Do not run it; the model is told, with the reason.
    Deny(Option<String>),
    /// Answer with this output without running the tool.
    Respond(Value),
    /// Restart the tool's own interrupt with this resume data (an answer to
    /// the tool's question).
    Restart(Value),
    /// Approve with an edited input: the call restarts with `input`
    /// (declared as `replacedInput`) and the approve reply. Under an
    /// approval rule the edited call is held again for its approvers.
    ApproveEdited {
        /// The new input.
        input: Value,
        /// Why; recorded in the audit trail.
        reason: Option<String>,
    },
}

/// What deciding a paused call did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The hold was decided and the session resumed: the turn's output.
    Resumed(Box<AgentOutput>),
    /// An approval was recorded; its rule's quorum is not met yet.
    Recorded {
        /// The approvals so far.
        approvals: Vec<HoldApproval>,
        /// How many the rule needs.
        quorum: u32,
        /// Whether this approval was new (the same approver counts once).
        counted: bool,
    },
}

impl Outcome {
    /// What a server's answer did, as an outcome.
    fn of_answer(answered: AnswerOutcome) -> Result<Outcome, CliError> {
        if let AnswerOutcome::Recorded {
            counted,
            quorum,
            approvals,
        } = answered
        {
            return Ok(Outcome::Recorded {
                approvals,
                quorum: quorum.unwrap_or(1),
                counted,
            });
        }
        let output = answered
            .output()
            .cloned()
            .ok_or_else(|| CliError::Server("the answer was neither recorded nor decided".into()))?;
        Ok(Outcome::Resumed(Box::new(output)))
    }
}

impl Decision {
    /// The resume directive for `part`: a tool that declares how its
    /// resume data means yes or no is answered in its own terms.
    pub fn directive(&self, part: &Part) -> holdpoint::Result<Part> {
        if let (Some(shape), Decision::Approve(reason) | Decision::Deny(reason)) = (ReplyShape::on(part), self) {
            let data = shape.answer(matches!(self, Decision::Approve(_)), reason.as_deref());
            return part.restart(Some(Value::Object(data)));
        }
        let hold = ToolApproval::interrupted(part);
        match (self, hold) {
            (Decision::Approve(reason), Some(h)) => h.approve(reason.as_deref()),
            (Decision::Deny(reason), Some(h)) => h.deny(reason.as_deref()),
            (Decision::Approve(reason), None) => part.restart(Some(approval(true, reason))),
            (Decision::Deny(reason), None) => part.restart(Some(approval(false, reason))),
            (Decision::Respond(output), _) => part.respond(output.clone()),
            (Decision::Restart(data), _) => part.restart(Some(data.clone())),
            (Decision::ApproveEdited { input, reason }, _) => {
                // The approve reply in the tool's own terms, on the new input.
                let approved = Decision::Approve(reason.clone()).directive(part)?;
                let resumed = approved
                    .meta(holdpoint::message::metadata::RESUMED)
                    .filter(|v| v.is_object())
                    .cloned();
                part.restart_with_input(input.clone(), resumed)
            }
        }
    }
}

fn approval(approved: bool, reason: &Option<String>) -> Value {
    let mut v = json!({ "approved": approved });
    if let Some(r) = reason {
        v["reason"] = Value::String(r.clone());
    }
    v
}

/// A resumed turn's error as the command reports it: a refusal on the
/// decision path (an answer that does not fit, or that the caller may not
/// give: nothing ran, the call still waits) is the error itself, as a
/// server answers it; any other failure is the failed output.
fn refused_or_failed(e: holdpoint::Error) -> holdpoint::Result<AgentOutput> {
    if holdpoint::agent::FailureReason::of(&e).is_refusal() {
        Err(e)
    } else {
        e.into_failed_output()
    }
}

/// The paused calls of a waiting snapshot (as the server lists them).
pub fn pending_of(snapshot: &Snapshot) -> Vec<PendingApproval> {
    PendingApproval::of(snapshot)
}

/// The paused call `reference` of `snapshot`, or a clear NotFound.
pub fn find_call(snapshot: &Snapshot, reference: &str) -> Result<Part, CliError> {
    if !snapshot.is_waiting() {
        let why = if snapshot.resume_lapsed(Utc::now()) {
            "its resume was left in doubt; see `holdpoint in-doubt` and `holdpoint settle`".to_owned()
        } else {
            format!("status {}; see `holdpoint pending`", snapshot.status.as_str())
        };
        return Err(CliError::NotFound(format!(
            "snapshot {} is not waiting for an answer ({why})",
            snapshot.snapshot_id
        )));
    }
    paused_call(snapshot, reference)
}

/// The paused call `reference` of `snapshot` (waiting or not).
fn paused_call(snapshot: &Snapshot, reference: &str) -> Result<Part, CliError> {
    pending_of(snapshot)
        .into_iter()
        .find(|p| p.reference.as_deref() == Some(reference) || (p.reference.is_none() && p.tool == reference))
        .map(|p| p.part)
        .ok_or_else(|| {
            CliError::NotFound(format!(
                "snapshot {} has no paused call with ref {reference} (see `holdpoint pending` or `holdpoint in-doubt`)",
                snapshot.snapshot_id
            ))
        })
}

/// The request context of an operator acting on the store directly: on
/// behalf of the session's owner (they hold the store's credentials), and
/// recorded as the actor `holdpoint-cli` in the audit trail.
fn operator_context(snapshot: &Snapshot) -> serde_json::Map<String, Value> {
    let mut context = serde_json::Map::new();
    if let Some(owner) = &snapshot.owner {
        context.insert(holdpoint::agent::PRINCIPAL.into(), Value::String(owner.clone()));
    }
    context.insert(holdpoint::agent::ACTOR.into(), Value::String("holdpoint-cli".into()));
    context
}

/// A store opened directly, with the agents registered by the binary.
pub struct StoreBackend {
    /// The store.
    pub store: Arc<dyn SessionStore>,
    /// Agents that can run resumed turns in-process.
    pub agents: Vec<Agent>,
}

/// The two places a command can act on.
pub enum Backend {
    /// A store, directly.
    Store(StoreBackend),
    /// A server, over HTTP.
    Server(HttpBackend),
}

impl Backend {
    /// Snapshots matching the filters, newest first.
    pub async fn snapshots(&self, agent: Option<&str>, limit: usize) -> Result<Vec<Snapshot>, CliError> {
        match self {
            Backend::Store(b) => Ok(b
                .store
                .capabilities()
                .listing()?
                .list_snapshots(&SnapshotQuery {
                    agent: agent.map(str::to_owned),
                    limit: Some(limit),
                    ..SnapshotQuery::default()
                })
                .await?),
            Backend::Server(_) => Err(CliError::Usage(
                "sessions list needs --store URL: a server lists paused calls (holdpoint pending) but not sessions"
                    .into(),
            )),
        }
    }

    /// The latest snapshot of `session`.
    pub async fn session(&self, session: &str, agent: Option<&str>) -> Result<Snapshot, CliError> {
        let found = match self {
            Backend::Store(b) => b.store.get_latest_snapshot(session).await?,
            Backend::Server(h) => h.latest_snapshot(session, agent).await?,
        };
        found.ok_or_else(|| CliError::NotFound(format!("session {session} not found")))
    }

    /// The ref that names a paused call of `snapshot_id`: `reference` when
    /// given, else that of its only paused call (a usage error naming the
    /// refs when it holds several). A call without a ref is named by its
    /// tool.
    pub async fn call_ref(&self, snapshot_id: &str, reference: Option<&str>) -> Result<String, CliError> {
        if let Some(reference) = reference {
            return Ok(reference.to_owned());
        }
        let snapshot = self.snapshot(snapshot_id, None).await?;
        let mut refs: Vec<String> = pending_of(&snapshot)
            .into_iter()
            .map(|p| p.reference.unwrap_or(p.tool))
            .collect();
        match refs.len() {
            1 => Ok(refs.swap_remove(0)),
            0 => Err(CliError::NotFound(format!(
                "snapshot {snapshot_id} holds no paused call (see `holdpoint pending` or `holdpoint in-doubt`)"
            ))),
            _ => Err(CliError::Usage(format!(
                "snapshot {snapshot_id} holds {} paused calls: name one of them after the snapshot ({})",
                refs.len(),
                refs.join(", ")
            ))),
        }
    }

    /// The snapshot `id`.
    pub async fn snapshot(&self, id: &str, agent: Option<&str>) -> Result<Snapshot, CliError> {
        let found = match self {
            Backend::Store(b) => b.store.get_snapshot(id).await?,
            Backend::Server(h) => h.snapshot(id, agent).await?,
        };
        found.ok_or_else(|| CliError::NotFound(format!("snapshot {id} not found")))
    }

    /// Aborts `snapshot`; returns the status it had.
    pub async fn abort(&self, snapshot: &str, agent: Option<&str>) -> Result<String, CliError> {
        let previous = match self {
            Backend::Store(b) => b.store.abort(snapshot).await?.map(|s| s.as_str().to_owned()),
            Backend::Server(h) => h.abort(snapshot, agent).await?,
        };
        previous.ok_or_else(|| CliError::NotFound(format!("snapshot {snapshot} not found")))
    }

    /// Paused calls waiting for an answer, newest first.
    pub async fn pending(&self, agent: Option<&str>, limit: usize) -> Result<Vec<PendingApproval>, CliError> {
        match self {
            Backend::Store(b) => {
                let snapshots = b
                    .store
                    .capabilities()
                    .listing()?
                    .list_snapshots(&SnapshotQuery {
                        agent: agent.map(str::to_owned),
                        waiting_only: true,
                        limit: Some(limit),
                        ..SnapshotQuery::default()
                    })
                    .await?;
                Ok(snapshots.iter().flat_map(pending_of).take(limit).collect())
            }
            Backend::Server(h) => h.pending(agent, limit).await,
        }
    }

    /// Decisions, newest first.
    pub async fn audit(
        &self,
        agent: Option<&str>,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, CliError> {
        match self {
            Backend::Store(b) => Ok(b
                .store
                .capabilities()
                .audit()?
                .list_audit(&AuditQuery {
                    agent: agent.map(str::to_owned),
                    session_id: session.map(str::to_owned),
                    limit: Some(limit),
                    ..AuditQuery::default()
                })
                .await?),
            Backend::Server(h) => h.audit(agent, session, limit).await,
        }
    }

    /// Calls left in doubt, newest first.
    pub async fn in_doubt(&self, agent: Option<&str>, limit: usize) -> Result<Vec<PendingApproval>, CliError> {
        match self {
            Backend::Store(b) => {
                let query = SnapshotQuery {
                    agent: agent.map(str::to_owned),
                    limit: Some(limit),
                    ..SnapshotQuery::default()
                };
                let capabilities = b.store.capabilities();
                let (listing, audit) = (capabilities.listing()?, capabilities.audit()?);
                let mut out = PendingApproval::list_in_doubt(listing.as_ref(), audit.as_ref(), query).await?;
                out.truncate(limit);
                Ok(out)
            }
            Backend::Server(h) => h.in_doubt(agent, limit).await,
        }
    }

    /// Settles the call `reference` left in doubt in `snapshot_id`: with
    /// `output` the tool does not run and the model gets it; without, the
    /// call is run again. Runs the rest of the turn.
    pub async fn settle(
        &self,
        snapshot_id: &str,
        reference: &str,
        output: Option<Value>,
    ) -> Result<AgentOutput, CliError> {
        let snapshot = self.snapshot(snapshot_id, None).await?;
        let part = paused_call(&snapshot, reference)?;
        let directive = match output {
            Some(v) => part.respond(v)?,
            None => part.restart(None)?,
        };
        let resume = Resume::from_parts([directive]);
        let name = snapshot.agent.clone().unwrap_or_default();
        match self {
            Backend::Store(b) => {
                let Some(agent) = b.agents.iter().find(|a| a.name() == name) else {
                    return Err(CliError::Usage(format!(
                        "settle needs the agent {name:?} to run the rest of the turn: use --server URL of a server that serves it (or register it with holdpoint_cli::run)"
                    )));
                };
                // A failed turn is reported like the server's failed output.
                Ok(agent
                    .decisions()
                    .settle(snapshot_id, resume, operator_context(&snapshot))
                    .await
                    .or_else(holdpoint::Error::into_failed_output)?)
            }
            Backend::Server(h) => h.settle(&name, snapshot_id, resume).await,
        }
    }

    /// Approves or denies the paused call `reference` of `snapshot_id`.
    /// On a server, as the caller: the server checks the call's approval
    /// rule, and an approval short of its quorum is only recorded. On a
    /// store, as an operator acting for the session's owner.
    pub async fn decide(&self, snapshot_id: &str, reference: &str, decision: &Decision) -> Result<Outcome, CliError> {
        let (approve, reason) = match decision {
            Decision::Approve(r) => (true, r.clone()),
            Decision::Deny(r) => (false, r.clone()),
            Decision::Respond(_) | Decision::Restart(_) | Decision::ApproveEdited { .. } => {
                return self
                    .answer_directly(snapshot_id, reference, decision)
                    .await
                    .map(|out| Outcome::Resumed(Box::new(out)));
            }
        };
        match self {
            Backend::Server(h) => {
                let snapshot = self.snapshot(snapshot_id, None).await?;
                let part = find_call(&snapshot, reference)?;
                let name = snapshot.agent.clone().unwrap_or_default();
                let answer = Answer {
                    snapshot_id: snapshot_id.to_owned(),
                    reference: part.as_tool_request().and_then(|r| r.reference.clone()),
                    tool: part.as_tool_request().map(|r| r.name.clone()),
                    decision: if approve { AnswerKind::Approve } else { AnswerKind::Deny },
                    reason,
                    grant: None,
                };
                let not_found = || {
                    CliError::NotFound(format!(
                        "snapshot {snapshot_id} not found on agent {name} (or not yours to answer)"
                    ))
                };
                let answered = h.answer(&name, answer).await?.ok_or_else(not_found)?;
                Outcome::of_answer(answered)
            }
            Backend::Store(_) => self
                .answer_directly(snapshot_id, reference, decision)
                .await
                .map(|out| Outcome::Resumed(Box::new(out))),
        }
    }

    /// Settles the paused call `reference` of `snapshot_id` with a resume
    /// and runs the resumed turn (in-process with a registered agent, or on
    /// the server).
    pub async fn answer_directly(
        &self,
        snapshot_id: &str,
        reference: &str,
        decision: &Decision,
    ) -> Result<AgentOutput, CliError> {
        match self {
            Backend::Store(b) => {
                let snapshot = self.snapshot(snapshot_id, None).await?;
                let name = snapshot.agent.clone().unwrap_or_default();
                let Some(agent) = b.agents.iter().find(|a| a.name() == name) else {
                    return Err(CliError::Usage(if b.agents.is_empty() {
                        "approve, deny and respond need --server URL: with --store the stock holdpoint binary has no agents to run the resumed turn (or register yours with holdpoint_cli::run)".to_owned()
                    } else {
                        format!(
                            "no agent named {name:?} is registered in this binary: use --server URL of a server that serves it"
                        )
                    }));
                };
                let part = find_call(&snapshot, reference)?;
                let directive = decision.directive(&part)?;
                let input = AgentInput::resume(Resume::from_parts([directive]));
                let context = operator_context(&snapshot);
                // A failed turn is reported like the server's failed output.
                Ok(agent
                    .run_with(
                        input,
                        RunOptions::new(AgentInit::snapshot(snapshot_id)).context(context),
                    )
                    .await
                    .or_else(refused_or_failed)?)
            }
            Backend::Server(h) => {
                let snapshot = self.snapshot(snapshot_id, None).await?;
                let part = find_call(&snapshot, reference)?;
                let directive = decision.directive(&part)?;
                let name = snapshot.agent.clone().unwrap_or_default();
                h.resume(&name, snapshot_id, Resume::from_parts([directive])).await
            }
        }
    }
}
