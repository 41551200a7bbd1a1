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
use crate::routes::agents::{reply_to, spawn_turn};
use crate::routes::pending::{ListQuery, access, caller_query, roles};
use crate::state::AppState;

/// `GET /agents/{name}/inDoubt?sessionId=&limit=`: the calls in doubt the
/// caller may settle, newest first, each with the decisions recorded for
/// it: the hold's approvers and the `operator` role see them, an owner
/// only what they could have answered (docs/reference.md §10.10).
pub(crate) async fn in_doubt(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let roles = roles(&caller);
    let items = agent
        .decisions()
        .in_doubt_for(
            caller_query(&state, agent, &caller, &query).await?,
            access(&caller, &roles),
        )
        .await?;
    Ok(reply(items).into_response())
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
        agent.decisions().settle(&snapshot_id, resume, context).await
    })
    .await;
    Ok(reply_to(out))
}
