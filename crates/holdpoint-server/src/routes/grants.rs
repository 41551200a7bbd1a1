//! `GET /grants` and `DELETE /grants/{id}`: the standing grants the caller
//! may manage — those of holds it may answer (docs/reference.md §10.9) —
//! across the agents it may use, and their revocation.

use std::collections::BTreeSet;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::approval::{Grant, GrantQuery};
use serde::Deserialize;

use crate::auth::Caller;
use crate::envelope::{ApiPath, ApiQuery, reply};
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /grants` query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GrantsQuery {
    /// Only this agent's.
    #[serde(default)]
    agent: Option<String>,
    /// Only this tool's.
    #[serde(default)]
    tool: Option<String>,
    /// `true`: only grants still usable (not revoked, not expired, uses left).
    #[serde(default)]
    active: Option<bool>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /grants?agent=&tool=&active=&limit=`: the grants the caller may
/// manage, newest first.
pub(crate) async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<GrantsQuery>,
) -> Result<Response, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, state.limits().max_list);
    let context = caller.request_context();
    let nonempty = |o: &Option<String>| o.clone().filter(|s| !s.is_empty());
    let agents: Vec<_> = match nonempty(&query.agent) {
        Some(name) => vec![state.agent(&caller, &name)?],
        None => state
            .agents()
            .values()
            .filter(|a| a.is_server_managed() && a.has_approval_policy() && caller.scope.allows(a.name()))
            .collect(),
    };
    let mut seen = BTreeSet::new();
    let mut out: Vec<Grant> = Vec::new();
    for agent in agents {
        let grants = agent
            .decisions()
            .grants(
                GrantQuery {
                    tool: nonempty(&query.tool),
                    active_at: (query.active == Some(true)).then(chrono::Utc::now),
                    limit: Some(limit),
                    ..GrantQuery::default()
                },
                &context,
            )
            .await?;
        out.extend(grants.into_iter().filter(|g| seen.insert(g.id.clone())));
    }
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
    out.truncate(limit);
    Ok(reply(out).into_response())
}

/// `DELETE /grants/{id}`: revokes a grant the caller may manage (it stops
/// matching at once, on every replica); 404 for a grant it may not.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let context = caller.request_context();
    for agent in state
        .agents()
        .values()
        .filter(|a| a.is_server_managed() && a.has_approval_policy() && caller.scope.allows(a.name()))
    {
        match agent.decisions().revoke_grant(&id, &context).await {
            Ok(grant) => return Ok(reply(grant).into_response()),
            Err(holdpoint::Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::not_found(format!("grant {id} not found")))
}
