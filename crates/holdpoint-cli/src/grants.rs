//! `holdpoint grants list|revoke` and `holdpoint approve --grant …`:
//! standing grants (docs/reference.md §10.9), against a server as the
//! caller (`--server URL --api-key KEY`) or against a store as an operator.

use clap::{Args, Subcommand};
use holdpoint::agent::{AgentOutput, Answer};
use holdpoint::approval::{Grant, GrantQuery, GrantRequest, GrantScope, GrantTtl};
use serde_json::json;

use crate::backend::{Backend, find_call};
use crate::error::CliError;
use crate::output::{print, print_json};

/// `grants …`.
#[derive(Subcommand, Debug)]
pub enum GrantsCommand {
    /// Standing grants you may manage, newest first.
    List {
        /// Only grants still usable (not revoked, not expired, uses left).
        #[arg(long)]
        active: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Revoke a grant: it stops letting calls through at once.
    Revoke {
        /// The grant's id (see `grants list`).
        id: String,
    },
}

/// The grant options of `approve`.
#[derive(Args, Debug, Clone, Default)]
pub struct GrantArgs {
    /// Approve, and don't ask again: for this session, this principal
    /// (the session's owner) or this agent's tool.
    #[arg(long, value_name = "session|principal|tool")]
    pub grant: Option<String>,
    /// How long the grant lasts (e.g. 30m, 1h, 2d).
    #[arg(long, requires = "grant")]
    pub grant_ttl: Option<GrantTtl>,
    /// How many calls the grant lets through.
    #[arg(long, requires = "grant")]
    pub grant_uses: Option<u32>,
    /// A CEL condition over later calls, e.g. 'input.amount < 100'.
    #[arg(long, requires = "grant")]
    pub grant_when: Option<String>,
}

impl GrantArgs {
    /// The grant asked for, if any.
    pub fn request(&self) -> Result<Option<GrantRequest>, CliError> {
        let Some(scope) = &self.grant else { return Ok(None) };
        let scope = GrantScope::parse(scope).map_err(|e| CliError::Usage(format!("--grant: {e}")))?;
        Ok(Some(GrantRequest {
            scope,
            when: self.grant_when.clone(),
            ttl: self.grant_ttl,
            uses: self.grant_uses,
        }))
    }
}

/// Runs `grants …`.
pub async fn run(command: GrantsCommand, backend: &Backend, agent: Option<&str>, json: bool) -> Result<(), CliError> {
    match command {
        GrantsCommand::List { active, limit } => {
            let grants = list(backend, agent, active, limit).await?;
            if json {
                return Ok(print_json(&grants)?);
            }
            if grants.is_empty() {
                return Ok(print("no grants\n")?);
            }
            let text: String = grants.iter().map(|g| format!("{}\n", line(g))).collect();
            Ok(print(&text)?)
        }
        GrantsCommand::Revoke { id } => {
            let grant = revoke(backend, &id).await?;
            if json {
                return Ok(print_json(&grant)?);
            }
            Ok(print(&format!("revoked {}\n", line(&grant)))?)
        }
    }
}

/// One grant for people: id, what it covers, by whom, and how much is left.
fn line(g: &Grant) -> String {
    let scope = match g.scope {
        GrantScope::Session => format!("session {}", g.session_id),
        GrantScope::Principal => format!("principal {}", g.principal.as_deref().unwrap_or("-")),
        GrantScope::Tool => "every session".to_owned(),
    };
    let mut text = format!(
        "{}  {}/{} for {scope}, granted by {}",
        g.id, g.agent, g.tool, g.granted_by
    );
    if let Some(when) = &g.when {
        text.push_str(&format!(", when {when}"));
    }
    match g.uses_left {
        Some(n) => text.push_str(&format!(", {n} uses left")),
        None => text.push_str(", unlimited uses"),
    }
    if let Some(at) = g.expires_at {
        text.push_str(&format!(", expires {}", at.to_rfc3339()));
    }
    if let Some(by) = &g.revoked_by {
        text.push_str(&format!(", revoked by {by}"));
    }
    text
}

async fn list(backend: &Backend, agent: Option<&str>, active: bool, limit: usize) -> Result<Vec<Grant>, CliError> {
    let query = GrantQuery {
        agent: agent.map(str::to_owned),
        active_at: active.then(chrono::Utc::now),
        limit: Some(limit),
        ..GrantQuery::default()
    };
    match backend {
        Backend::Server(h) => h
            .grants(query)
            .await?
            .ok_or_else(|| CliError::NotFound("the server lists no grants".into())),
        Backend::Store(b) => Ok(b.store.capabilities().grants()?.list_grants(&query).await?),
    }
}

async fn revoke(backend: &Backend, id: &str) -> Result<Grant, CliError> {
    let missing = || CliError::NotFound(format!("grant {id} not found (or not yours to revoke)"));
    match backend {
        Backend::Server(h) => h.revoke_grant(id).await?.ok_or_else(missing),
        Backend::Store(b) => b
            .store
            .capabilities()
            .grants()?
            .revoke_grant(id, "holdpoint-cli", chrono::Utc::now())
            .await?
            .ok_or_else(missing),
    }
}

/// `approve SNAPSHOT REF --grant …`: the approval and the grant it asks for.
pub async fn approve(
    backend: &Backend,
    snapshot_id: &str,
    reference: &str,
    reason: Option<String>,
    grant: GrantRequest,
    json: bool,
) -> Result<(), CliError> {
    let snapshot = backend.snapshot(snapshot_id, None).await?;
    let part = find_call(&snapshot, reference)?;
    let request = part.as_tool_request();
    let mut answer = Answer::approve(snapshot_id).grant(grant);
    answer.reference = request.and_then(|r| r.reference.clone());
    answer.tool = request.map(|r| r.name.clone());
    answer.reason = reason;
    let name = snapshot.agent.clone().unwrap_or_default();
    let (output, grant): (Option<AgentOutput>, Option<Grant>) = match backend {
        Backend::Server(h) => {
            let answered = h
                .answer(&name, answer)
                .await?
                .ok_or_else(|| CliError::NotFound(format!("snapshot {snapshot_id} not found")))?;
            (answered.output().cloned(), answered.grant().cloned())
        }
        Backend::Store(_) => {
            return Err(CliError::Usage(
                "approve --grant: answer as an approver with --server URL --api-key KEY (a grant records who granted it)".into(),
            ));
        }
    };
    if json {
        return Ok(print_json(&json!({"decided": true, "output": output, "grant": grant}))?);
    }
    let text = match &grant {
        Some(g) => format!("approved; granted {}\n", line(g)),
        None => "approved\n".to_owned(),
    };
    Ok(print(&text)?)
}
