//! `POST /agents/{name}/getSnapshot` and `POST /agents/{name}/abort`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::session::Snapshot;

use crate::auth::Caller;
use crate::envelope::{AbortRequest, AbortResult, ApiJson, ApiPath, SnapshotRequest, reply};
use crate::error::ApiError;
use crate::state::AppState;

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// A row this agent did not write (another agent's of a shared store, one
/// without `agent`, a claim marker) reads as unknown. The agent's own
/// reads already check it (see [`Snapshot::belongs_to`]); checked again
/// here because these routes answer with the row itself.
fn of_agent(snapshot: Option<Snapshot>, agent: &str) -> Option<Snapshot> {
    snapshot.filter(|s| s.belongs_to(agent))
}

/// `{"data": {"snapshotId"?, "sessionId"?, "metadataOnly"?}}` →
/// `{"result": Snapshot}`; 404 for unknown ids and for another principal's.
pub(crate) async fn get_snapshot(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<SnapshotRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let roles = crate::routes::pending::roles(&caller);
    let access = crate::routes::pending::access(&caller, &roles);
    let data = request.data;
    let snapshot_id = non_empty(data.snapshot_id);
    let session_id = non_empty(data.session_id);
    let mut snapshot = match (snapshot_id, session_id) {
        (Some(id), session) => {
            let found = of_agent(agent.snapshot(&id, access).await?, &name)
                .ok_or_else(|| ApiError::not_found(format!("snapshot {id} not found")))?;
            if let Some(session) = session
                && found.session_id != session
            {
                return Err(ApiError::not_found(format!(
                    "snapshot {id} not found in session {session}"
                )));
            }
            found
        }
        (None, Some(session)) => of_agent(agent.latest_snapshot(&session, access).await?, &name)
            .ok_or_else(|| ApiError::not_found(format!("session {session} not found")))?,
        (None, None) => {
            return Err(ApiError::invalid("getSnapshot needs data.snapshotId or data.sessionId"));
        }
    };
    if data.metadata_only {
        snapshot.state = None;
    }
    Ok(reply(snapshot).into_response())
}

/// `{"data": {"snapshotId"}}` → `{"result": {"snapshotId", "status",
/// "previousStatus"}}`; 404 for unknown ids and for another principal's.
pub(crate) async fn abort(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<AbortRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let principal = caller.principal();
    let id = request.data.snapshot_id;
    let unknown = || ApiError::not_found(format!("snapshot {id} not found"));
    if id.is_empty()
        || of_agent(
            agent.snapshot(&id, holdpoint::agent::Access::As(principal)).await?,
            &name,
        )
        .is_none()
    {
        return Err(unknown());
    }
    let previous = agent
        .abort(&id, holdpoint::agent::Access::As(principal))
        .await?
        .ok_or_else(unknown)?;
    let status = agent
        .snapshot(&id, holdpoint::agent::Access::As(principal))
        .await?
        .map(|s| s.status)
        .unwrap_or(previous);
    Ok(reply(AbortResult {
        snapshot_id: id,
        status,
        previous_status: previous,
    })
    .into_response())
}
