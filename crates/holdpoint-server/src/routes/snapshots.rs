//! `POST /agents/{name}/getSnapshot`, `POST /agents/{name}/waitForSnapshot`
//! and `POST /agents/{name}/abort`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use holdpoint::session::Snapshot;

use crate::auth::Caller;
use std::time::Duration;

use crate::envelope::{AbortRequest, AbortResult, ApiJson, ApiPath, SnapshotRequest, WaitRequest, reply};
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

/// `snapshot` as people and other systems read it: the inputs its held
/// calls record as redacted masked (docs/reference.md §22.1). A resume
/// built from the masked parts still answers the real calls.
fn masked(snapshot: &mut Snapshot) {
    if let Some(state) = snapshot.state.as_mut() {
        holdpoint::review::redact_messages(&mut state.messages);
    }
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
    masked(&mut snapshot);
    Ok(reply(snapshot).into_response())
}

/// How long `waitForSnapshot` waits when the request names no bound.
pub const WAIT_DEFAULT: Duration = Duration::from_secs(30);
/// The longest `waitForSnapshot` waits, whatever the request asks.
pub const WAIT_MAX: Duration = Duration::from_secs(120);

/// `{"data": {"snapshotId", "timeoutMs"?}}` → `{"result": Snapshot}` once
/// the snapshot leaves `pending`/`aborting`, or as it stands when the wait
/// (at most [`WAIT_MAX`]) runs out; 404 for unknown ids and for another
/// principal's (docs/reference.md §6.5).
pub(crate) async fn wait_for_snapshot(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<WaitRequest>,
) -> Result<Response, ApiError> {
    let agent = state.agent(&caller, &name)?;
    let principal = caller.principal();
    let id = request.data.snapshot_id;
    if id.is_empty() {
        return Err(ApiError::invalid("waitForSnapshot needs data.snapshotId"));
    }
    let wait = request
        .data
        .timeout_ms
        .map_or(WAIT_DEFAULT, Duration::from_millis)
        .min(WAIT_MAX);
    let snapshot = agent
        .wait_for_snapshot(&id, holdpoint::agent::Access::As(principal), wait)
        .await?;
    let mut snapshot =
        of_agent(snapshot, &name).ok_or_else(|| ApiError::not_found(format!("snapshot {id} not found")))?;
    masked(&mut snapshot);
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
