//! The notification pipe for operators (docs/reference.md §11.3):
//! `GET /notifications` lists the outbox (delivered, retrying, dead, …,
//! with attempts and the last error) and the endpoints stopped by a 410;
//! `POST /notifications/{id}/retry` makes a row due again (re-enabling the
//! stopped endpoints it skipped); `POST
//! /notifications/endpoints/{channel}/enable` re-enables one endpoint.
//!
//! Only callers with the [`OPERATOR_ROLE`] role get in (403 otherwise);
//! without [`ServerBuilder::notifications`](crate::ServerBuilder::notifications)
//! the routes answer 404. Listings carry channel ids (`webhook:0`),
//! never an endpoint's URL or secret, and no hold's input.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use holdpoint::session::{EndpointStop, OutboxEvent, OutboxQuery, OutboxState, OutboxStore};
use serde::{Deserialize, Serialize};

use crate::auth::{Caller, Identity};
use crate::envelope::{ApiPath, ApiQuery, reply};
use crate::error::ApiError;
use crate::state::AppState;

/// The role that lets a caller see and steer the notification pipe (the
/// core's: the same role settles any call in doubt, docs/reference.md §10.10).
pub use holdpoint::agent::OPERATOR_ROLE;

/// The listing's state filter.
const STATES: &str = "pending, retrying, delivered, dead, cancelled";

/// `?state=&limit=&offset=`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotificationsQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// One outbox row as operators see it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NotificationView {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    timer: bool,
    /// `pending`, `retrying` (pending after a failure), `delivered`,
    /// `dead`, `cancelled`.
    state: &'static str,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    due_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    session_id: String,
    snapshot_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    reference: Option<String>,
    /// The channels that took it (or skipped it, stopped).
    done: Vec<String>,
}

impl NotificationView {
    fn of(e: OutboxEvent) -> Self {
        let retrying = e.state == OutboxState::Pending && e.last_error.is_some();
        NotificationView {
            state: if retrying { "retrying" } else { e.state.as_str() },
            tool: e.data.get("tool").and_then(|t| t.as_str()).map(str::to_owned),
            reference: e.reference().map(str::to_owned),
            id: e.id,
            kind: e.kind,
            timer: e.timer,
            attempts: e.attempts,
            last_error: e.last_error,
            due_at: e.due_at,
            created_at: e.created_at,
            agent: e.agent,
            session_id: e.session_id,
            snapshot_id: e.snapshot_id,
            done: e.done,
        }
    }
}

/// A stopped endpoint as listed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EndpointView {
    channel: String,
    state: &'static str,
    reason: String,
    stopped_at: DateTime<Utc>,
}

impl EndpointView {
    fn of(s: EndpointStop) -> Self {
        EndpointView {
            channel: s.channel,
            state: "stopped",
            reason: s.reason,
            stopped_at: s.stopped_at,
        }
    }
}

/// The listing's answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listing {
    notifications: Vec<NotificationView>,
    /// The offset of the next page (absent on the last).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<usize>,
    endpoints: Vec<EndpointView>,
}

/// The outbox, if `caller` is an operator and the server serves one.
fn operator_outbox<'a>(state: &'a AppState, caller: &Identity) -> Result<&'a Arc<dyn OutboxStore>, ApiError> {
    if !caller.roles.contains(OPERATOR_ROLE) {
        return Err(ApiError::permission_denied(format!(
            "the notification pipe is for operators: the caller needs the \"{OPERATOR_ROLE}\" role"
        )));
    }
    state
        .outbox()
        .ok_or_else(|| ApiError::not_found("this server serves no notification outbox"))
}

/// `GET /notifications?state=&limit=&offset=` →
/// `{"result": {"notifications": [...], "nextOffset"?, "endpoints": [...]}}`,
/// oldest due first.
pub(crate) async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<NotificationsQuery>,
) -> Result<Response, ApiError> {
    let store = operator_outbox(&state, &caller)?;
    let (filter, retrying) = match query.state.as_deref().filter(|s| !s.is_empty()) {
        None => (None, false),
        Some("retrying") => (Some(OutboxState::Pending), true),
        Some(other) => (
            Some(
                OutboxState::parse(other)
                    .ok_or_else(|| ApiError::invalid(format!("state: unknown state \"{other}\" (one of {STATES})")))?,
            ),
            false,
        ),
    };
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > state.limits().max_list {
        return Err(ApiError::invalid(format!(
            "limit: must be between 1 and {}",
            state.limits().max_list
        )));
    }
    let offset = query.offset.unwrap_or(0);
    let rows = store
        .list_outbox(&OutboxQuery {
            state: filter,
            retrying,
            limit: Some(limit + 1),
            offset: Some(offset),
            ..OutboxQuery::default()
        })
        .await?;
    let more = rows.len() > limit;
    let notifications = rows.into_iter().take(limit).map(NotificationView::of).collect();
    let endpoints = store
        .stopped_endpoints()
        .await?
        .into_iter()
        .map(EndpointView::of)
        .collect();
    Ok(reply(Listing {
        notifications,
        next_offset: more.then_some(offset + limit),
        endpoints,
    })
    .into_response())
}

/// `POST /notifications/{id}/retry` → `{"result": notification}`: the row
/// is pending again, due now, its attempts reset, and the stopped
/// endpoints it skipped are re-enabled. 404 for no such row.
pub(crate) async fn retry(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let store = operator_outbox(&state, &caller)?;
    let row = store
        .retry_outbox(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("notification {id} not found")))?;
    tracing::info!(event_id = %id, operator = caller.principal.as_deref().unwrap_or(""), "notification retried");
    Ok(reply(NotificationView::of(row)).into_response())
}

/// `POST /notifications/endpoints/{channel}/enable` →
/// `{"result": {"channel", "state": "enabled"}}`; 404 when that endpoint
/// is not stopped.
pub(crate) async fn enable(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(channel): ApiPath<String>,
) -> Result<Response, ApiError> {
    let store = operator_outbox(&state, &caller)?;
    if !store.enable_endpoint(&channel).await? {
        return Err(ApiError::not_found(format!("endpoint {channel} is not stopped")));
    }
    tracing::info!(%channel, operator = caller.principal.as_deref().unwrap_or(""), "notification endpoint re-enabled");
    Ok(reply(serde_json::json!({"channel": channel, "state": "enabled"})).into_response())
}
