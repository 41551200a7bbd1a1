//! `GET /agents/{name}/inDoubt` and `POST /agents/{name}/settle`: calls a
//! resume left in doubt when its process died (docs/reference.md §8), and settling
//! them.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::agent::AgentInput;

use crate::auth::Caller;
use crate::envelope::{ApiJson, ApiPath, ApiQuery, SettleRequest, reply};
use crate::error::ApiError;
use crate::metrics::TurnMeta;
use crate::routes::pending::{ListQuery, caller_query, visible};
use crate::state::AppState;
use crate::turns::{claim_conflict, spawn_turn};

/// `GET /agents/{name}/inDoubt?sessionId=&limit=`: the caller's calls in
/// doubt, newest first, each with the decisions recorded for it.
pub(crate) async fn in_doubt(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let items = agent
        .in_doubt(caller_query(&state, agent, &caller, &query).await?)
        .await?;
    Ok(reply(visible(items, &caller)).into_response())
}

/// `{"data": {"snapshotId", "resume": {"respond"?, "restart"?}}}` →
/// `{"result": AgentOutput}` of the settled turn. 400 when the snapshot is
/// not in doubt, 404 for unknown or foreign ids, 409 when another
/// settlement won.
pub(crate) async fn settle(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<SettleRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?.clone();
    let snapshot_id = request.data.snapshot_id;
    if snapshot_id.is_empty() {
        return Err(ApiError::invalid("settle needs data.snapshotId"));
    }
    let input = AgentInput::resume(request.data.resume);
    input.validate()?;
    let resume = input.resume.unwrap_or_default();
    let meta = TurnMeta {
        agent: agent.name().to_owned(),
    };
    let context = caller.request_context();
    let out = spawn_turn(&state, agent, meta, move |agent| async move {
        agent.settle(&snapshot_id, resume, context).await
    })
    .await?;
    if let Some(err) = claim_conflict(&out) {
        return Ok(ApiError::from(err.clone()).into_response());
    }
    Ok(reply(out).into_response())
}
