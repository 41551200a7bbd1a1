//! `GET /agents`, `GET /agents/{name}/pending` and `GET /agents/{name}/audit`:
//! what the approval page lists.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::agent::{Access, Agent};
use holdpoint::session::{AuditQuery, SnapshotQuery};
use serde::{Deserialize, Serialize};

use crate::auth::{Caller, Identity};
use crate::envelope::{ApiPath, ApiQuery, reply};
use crate::error::ApiError;
use crate::state::AppState;

/// An agent as `GET /agents` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentInfo {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// `server` (sessions in a store) or `client` (state travels with the caller).
    state_management: &'static str,
    /// Whether its detached runs can be aborted (Genkit's `abortable`):
    /// every server-managed agent's, custom ones included.
    abortable: bool,
    /// Its tools with their schemas (the page builds the settle form of a
    /// call in doubt from the output schema); empty for a custom agent.
    tools: Vec<AgentTool>,
}

/// A tool as `GET /agents` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentTool {
    name: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<serde_json::Value>,
}

/// `GET /agents`: the agents the caller may use.
pub(crate) async fn list_agents(State(state): State<AppState>, Caller(caller): Caller) -> Response {
    let agents: Vec<AgentInfo> = state
        .agents()
        .values()
        .filter(|a| caller.scope.allows(a.name()))
        .map(|a| AgentInfo {
            name: a.name().to_owned(),
            description: a.description().map(str::to_owned),
            state_management: if a.is_server_managed() { "server" } else { "client" },
            abortable: a.is_server_managed(),
            tools: a
                .tool_definitions()
                .iter()
                .map(|d| AgentTool {
                    name: d.name.clone(),
                    description: d.description.clone(),
                    input_schema: d.input_schema.clone(),
                    output_schema: d.output_schema.clone(),
                })
                .collect(),
        })
        .collect();
    reply(agents).into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListQuery {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

impl ListQuery {
    /// The session filter (an empty one is none).
    pub(crate) fn session(&self) -> Option<&str> {
        self.session_id.as_deref().filter(|s| !s.is_empty())
    }

    /// The limit, within the server's bound.
    pub(crate) fn limit_in(&self, state: &AppState) -> usize {
        self.limit.unwrap_or(100).clamp(1, state.limits().max_list)
    }
}

fn limit(state: &AppState, query: &ListQuery) -> usize {
    query.limit_in(state)
}

/// 404 unless the caller may see `session_id` of `agent`.
async fn check_session(agent: &Agent, caller: &Identity, session_id: &str) -> Result<(), ApiError> {
    let roles = roles(caller);
    match agent.latest_snapshot(session_id, access(caller, &roles)).await? {
        Some(s) if s.belongs_to(agent.name()) => Ok(()),
        _ => Err(ApiError::not_found(format!("session {session_id} not found"))),
    }
}

/// `GET /agents/{name}/pending?sessionId=&limit=`: the caller's paused
/// calls waiting for an answer, newest first.
pub(crate) async fn pending(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let roles = roles(&caller);
    let items = agent
        .decisions()
        .pending_for(
            caller_query(&state, agent, &caller, &query).await?,
            access(&caller, &roles),
        )
        .await?;
    Ok(reply(items).into_response())
}

/// The caller's roles, as [`Access::Caller`] takes them.
pub(crate) fn roles(caller: &Identity) -> Vec<String> {
    caller.roles.iter().cloned().collect()
}

/// What `caller` (with `roles`) may see: its own sessions, and the holds
/// its roles may answer (docs/reference.md §10.7).
pub(crate) fn access<'a>(caller: &'a Identity, roles: &'a [String]) -> Access<'a> {
    Access::Caller {
        principal: caller.principal(),
        roles,
    }
}

/// The snapshot query of a listing for `caller`: their own sessions, or
/// the one `sessionId` names (404 unless they may see it).
pub(crate) async fn caller_query(
    state: &AppState,
    agent: &Agent,
    caller: &Identity,
    query: &ListQuery,
) -> Result<SnapshotQuery, ApiError> {
    let session_id = query.session().map(str::to_owned);
    if let Some(id) = &session_id {
        check_session(agent, caller, id).await?;
    }
    Ok(SnapshotQuery {
        owner: caller.principal().map(str::to_owned),
        session_id,
        limit: Some(query.limit_in(state)),
        ..SnapshotQuery::default()
    })
}

/// `GET /agents/{name}/audit?sessionId=&limit=`: decisions, newest first —
/// of one session the caller may see, or else the caller's own.
pub(crate) async fn audit(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let session_id = query.session_id.clone().filter(|s| !s.is_empty());
    let principal = caller.principal().map(str::to_owned);
    let by_session = session_id.is_some();
    if let Some(id) = &session_id {
        check_session(agent, &caller, id).await?;
    }
    let records = agent
        .decisions()
        .audit(AuditQuery {
            session_id,
            principal: if by_session { None } else { principal.clone() },
            limit: Some(limit(&state, &query)),
            ..AuditQuery::default()
        })
        .await?;
    let records: Vec<_> = records
        .into_iter()
        .filter(|r| by_session || principal.is_some() || r.principal.is_none())
        .collect();
    Ok(reply(records).into_response())
}
