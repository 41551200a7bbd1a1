//! The notification pipe for operators (docs/reference.md §11.3.1): `GET
//! /notifications`, `POST /notifications/{id}/retry`, `POST
//! /notifications/endpoints/{channel}/enable`. Only callers with the
//! `operator` role get in (`PERMISSION_DENIED`, 403, otherwise); a server
//! that serves no outbox answers `NOT_FOUND` (404).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::approver::encode_segment;
use crate::client::Client;
use crate::error::Result;

/// Which notifications to list, oldest due first.
///
/// ```
/// use holdpoint_client::NotificationQuery;
/// let query = NotificationQuery::new().state("dead").limit(20);
/// assert_eq!(query.state.as_deref(), Some("dead"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotificationQuery {
    /// Only rows in this state: `pending`, `retrying` (pending after a
    /// failure), `delivered`, `dead`, `cancelled`.
    pub state: Option<String>,
    /// At most this many (the server's default 100).
    pub limit: Option<usize>,
    /// Skip this many (a previous page's `next_offset`).
    pub offset: Option<usize>,
}

impl NotificationQuery {
    /// Every row, the server's default number.
    pub fn new() -> Self {
        NotificationQuery::default()
    }

    /// Only rows in `state`.
    pub fn state(mut self, state: impl Into<String>) -> Self {
        self.state = Some(state.into());
        self
    }

    /// At most `limit`.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Skip `offset` rows.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = Some(offset);
        self
    }
}

/// One outbox row as operators see it (never an endpoint's URL or secret,
/// nor a hold's input).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Notification {
    /// The row's id.
    pub id: String,
    /// The event type (`hold`, `reminder`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether a timer (reminder, escalation, expiry) raised it.
    #[serde(default)]
    pub timer: bool,
    /// `pending`, `retrying`, `delivered`, `dead` or `cancelled`.
    pub state: String,
    /// Delivery attempts so far.
    #[serde(default)]
    pub attempts: u32,
    /// The last failure.
    #[serde(default)]
    pub last_error: Option<String>,
    /// When it is due.
    pub due_at: DateTime<Utc>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// The agent of the hold.
    #[serde(default)]
    pub agent: Option<String>,
    /// The session of the hold.
    pub session_id: String,
    /// The held snapshot.
    pub snapshot_id: String,
    /// The held call's tool.
    #[serde(default)]
    pub tool: Option<String>,
    /// The held call's ref.
    #[serde(rename = "ref", default)]
    pub reference: Option<String>,
    /// The channels that took it (or skipped it, stopped).
    #[serde(default)]
    pub done: Vec<String>,
}

/// An endpoint stopped by a refusal (HTTP 410).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StoppedEndpoint {
    /// The channel's id (`webhook:0`, `slack:1`).
    pub channel: String,
    /// Why.
    pub reason: String,
    /// Since when.
    pub stopped_at: DateTime<Utc>,
}

/// One page of the outbox, with the stopped endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NotificationsPage {
    /// The rows, oldest due first.
    pub notifications: Vec<Notification>,
    /// The offset of the next page; `None` on the last one.
    #[serde(default)]
    pub next_offset: Option<usize>,
    /// The endpoints stopped by a 410.
    #[serde(default)]
    pub endpoints: Vec<StoppedEndpoint>,
}

impl Client {
    /// The notification outbox (`GET /notifications`), for operators.
    pub async fn notifications(&self, query: NotificationQuery) -> Result<NotificationsPage> {
        let pairs = [
            ("state", query.state.unwrap_or_default()),
            ("limit", query.limit.map(|n| n.to_string()).unwrap_or_default()),
            ("offset", query.offset.map(|n| n.to_string()).unwrap_or_default()),
        ];
        self.get_result("/notifications", &pairs).await
    }

    /// Makes notification `id` due again (`POST /notifications/{id}/retry`):
    /// pending, due now, attempts reset, and the stopped endpoints it
    /// skipped re-enabled. `NOT_FOUND` (404) for no such row.
    pub async fn retry_notification(&self, id: &str) -> Result<Notification> {
        let path = format!("/notifications/{}/retry", encode_segment(id));
        self.call(&path, &json!({})).await
    }

    /// Re-enables the endpoint of `channel` (`POST
    /// /notifications/endpoints/{channel}/enable`). `NOT_FOUND` (404) when
    /// it is not stopped.
    pub async fn enable_endpoint(&self, channel: &str) -> Result<()> {
        let path = format!("/notifications/endpoints/{}/enable", encode_segment(channel));
        let _: Value = self.call(&path, &json!({})).await?;
        Ok(())
    }
}
