//! `holdpoint notifications list | retry ID | enable CHANNEL`: the
//! notification outbox for operators (docs/reference.md §11.3), against a
//! store (`--store`) or a server (`--server URL --api-key KEY`, a key with
//! the `operator` role: `GET /notifications`, `POST
//! /notifications/{id}/retry`, `POST /notifications/endpoints/{channel}/enable`).
//! Both print the same rows; neither shows an endpoint's URL or secret.

use chrono::{DateTime, Utc};
use holdpoint::session::{EndpointStop, OutboxEvent, OutboxQuery, OutboxState};
use holdpoint_client::{Notification, NotificationQuery, StoppedEndpoint};
use serde::Serialize;

use crate::args::NotificationsCommand;
use crate::backend::Backend;
use crate::error::CliError;
use crate::output::{Table, print, print_json, time, with_progress};

/// The `--state` values.
const STATES: &str = "pending, retrying, delivered, dead or cancelled";

/// One outbox row as listed (the server's `GET /notifications` shape).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationRow {
    /// The event id (the idempotency key).
    pub id: String,
    /// The event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// `pending`, `retrying`, `delivered`, `dead` or `cancelled`.
    pub state: String,
    /// Attempts started.
    pub attempts: u32,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it is due.
    pub due_at: DateTime<Utc>,
    /// The snapshot it is about.
    pub snapshot_id: String,
    /// The session.
    pub session_id: String,
    /// The channels that took it.
    #[serde(default)]
    pub done: Vec<String>,
}

impl NotificationRow {
    fn of(e: OutboxEvent) -> Self {
        let retrying = e.state == OutboxState::Pending && e.last_error.is_some();
        NotificationRow {
            state: if retrying { "retrying" } else { e.state.as_str() }.to_owned(),
            id: e.id,
            kind: e.kind,
            attempts: e.attempts,
            last_error: e.last_error,
            due_at: e.due_at,
            snapshot_id: e.snapshot_id,
            session_id: e.session_id,
            done: e.done,
        }
    }
}

impl NotificationRow {
    /// A row as the server listed it.
    fn listed(n: Notification) -> Self {
        NotificationRow {
            id: n.id,
            kind: n.kind,
            state: n.state,
            attempts: n.attempts,
            last_error: n.last_error,
            due_at: n.due_at,
            snapshot_id: n.snapshot_id,
            session_id: n.session_id,
            done: n.done,
        }
    }
}

/// A stopped endpoint as listed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct StoppedRow {
    channel: String,
    reason: String,
    stopped_at: DateTime<Utc>,
}

impl StoppedRow {
    fn of(s: EndpointStop) -> Self {
        StoppedRow {
            channel: s.channel,
            reason: s.reason,
            stopped_at: s.stopped_at,
        }
    }

    /// A stopped endpoint as the server listed it.
    fn listed(s: StoppedEndpoint) -> Self {
        StoppedRow {
            channel: s.channel,
            reason: s.reason,
            stopped_at: s.stopped_at,
        }
    }
}

/// The store query of a `--state` value.
fn query(state: Option<&str>, limit: usize, offset: usize) -> Result<OutboxQuery, CliError> {
    let (state, retrying) = match state {
        None => (None, false),
        Some("retrying") => (Some(OutboxState::Pending), true),
        Some(s) => (
            Some(OutboxState::parse(s).ok_or_else(|| CliError::Usage(format!("--state {s}: expected {STATES}")))?),
            false,
        ),
    };
    Ok(OutboxQuery {
        state,
        retrying,
        limit: Some(limit),
        offset: Some(offset),
        ..OutboxQuery::default()
    })
}

/// One page of the outbox and the endpoints stopped by a 410, from the
/// store or the server.
async fn outbox(
    backend: &Backend,
    state: Option<String>,
    limit: usize,
    offset: usize,
) -> Result<(Vec<NotificationRow>, Vec<StoppedRow>), CliError> {
    let q = query(state.as_deref(), limit, offset)?;
    match backend {
        Backend::Store(b) => {
            let outbox = b.store.capabilities().outbox()?.clone();
            let rows = outbox.list_outbox(&q).await?;
            let stopped = outbox.stopped_endpoints().await?;
            Ok::<_, CliError>((
                rows.into_iter().map(NotificationRow::of).collect::<Vec<_>>(),
                stopped.into_iter().map(StoppedRow::of).collect::<Vec<_>>(),
            ))
        }
        Backend::Server(h) => {
            let mut query = NotificationQuery::new().limit(limit).offset(offset);
            if let Some(s) = &state {
                query = query.state(s.clone());
            }
            let page = h.notifications(query).await?;
            Ok((
                page.notifications.into_iter().map(NotificationRow::listed).collect(),
                page.endpoints.into_iter().map(StoppedRow::listed).collect(),
            ))
        }
    }
}

/// Runs a `notifications` subcommand.
pub async fn run(command: NotificationsCommand, as_json: bool, backend: &Backend) -> Result<(), CliError> {
    match command {
        NotificationsCommand::List { state, limit, offset } => {
            let (rows, stopped) = with_progress("reading the outbox…", outbox(backend, state, limit, offset)).await?;
            if as_json {
                return Ok(print_json(&rows)?);
            }
            let mut t = Table::new(vec![
                "ID",
                "TYPE",
                "STATE",
                "ATTEMPTS",
                "DUE",
                "SNAPSHOT",
                "DONE",
                "LAST ERROR",
            ]);
            for e in &rows {
                t.row(vec![
                    e.id.clone(),
                    e.kind.clone(),
                    e.state.clone(),
                    e.attempts.to_string(),
                    time(e.due_at),
                    e.snapshot_id.clone(),
                    if e.done.is_empty() {
                        "-".to_owned()
                    } else {
                        e.done.join(",")
                    },
                    e.last_error.clone().unwrap_or_else(|| "-".to_owned()),
                ]);
            }
            let mut text = t.render("no notifications");
            for s in &stopped {
                text.push_str(&format!(
                    "endpoint {} is stopped since {} ({}); `holdpoint notifications enable {}` re-enables it\n",
                    s.channel,
                    time(s.stopped_at),
                    s.reason,
                    s.channel
                ));
            }
            Ok(print(&text)?)
        }
        NotificationsCommand::Retry { id } => {
            let row = match backend {
                Backend::Store(b) => b
                    .store
                    .capabilities()
                    .outbox()?
                    .retry_outbox(&id)
                    .await?
                    .map(NotificationRow::of)
                    .ok_or_else(|| CliError::NotFound(format!("notification {id} not found")))?,
                Backend::Server(h) => NotificationRow::listed(h.retry_notification(&id).await?),
            };
            if as_json {
                return Ok(print_json(&row)?);
            }
            Ok(print(&format!(
                "notification {} is pending again ({})\n",
                row.id, row.kind
            ))?)
        }
        NotificationsCommand::Enable { channel } => {
            match backend {
                Backend::Store(b) => {
                    if !b.store.capabilities().outbox()?.enable_endpoint(&channel).await? {
                        return Err(CliError::NotFound(format!("endpoint {channel} is not stopped")));
                    }
                }
                Backend::Server(h) => h.enable_endpoint(&channel).await?,
            }
            Ok(print(&format!("endpoint {channel} gets deliveries again\n"))?)
        }
    }
}
