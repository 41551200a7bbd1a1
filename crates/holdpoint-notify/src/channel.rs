//! The channel trait and how a channel picks the events it serves.

use async_trait::async_trait;

use crate::message::Notification;

/// Why one delivery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// Try again later (5xx, timeout, closed connection, …).
    #[error("{0}")]
    Retry(String),
    /// The endpoint is gone for good (HTTP 410): it gets nothing more.
    #[error("{0}")]
    Gone(String),
}

/// A place notifications go.
#[async_trait]
pub trait Channel: Send + Sync {
    /// A stable name for listings and logs (`webhook:0`, …), never a
    /// secret; recorded on rows it delivered.
    fn id(&self) -> &str;

    /// A fingerprint of the endpoint's address (a hash, never the address
    /// itself, which may hold a token): a stop after HTTP 410 applies only
    /// while the channel still points at the endpoint that refused. The
    /// default (channels that never answer 410) is empty.
    fn fingerprint(&self) -> String {
        String::new()
    }

    /// Whether it serves `n` (its event types and roles).
    fn serves(&self, n: &Notification) -> bool;

    /// Delivers `n` once. Errors never carry secrets.
    async fn deliver(&self, n: &Notification) -> Result<(), DeliveryError>;
}

/// The routing filter shared by the channels: event types (empty: all)
/// and approver roles (empty: all; an event naming no approvers goes to
/// every channel that takes its type).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Route {
    pub events: Vec<String>,
    pub roles: Vec<String>,
}

impl Route {
    pub fn serves(&self, n: &Notification) -> bool {
        if !self.events.is_empty() && !self.events.contains(&n.kind) {
            return false;
        }
        let approvers = n.approvers();
        self.roles.is_empty() || approvers.is_empty() || approvers.iter().any(|a| self.roles.contains(a))
    }
}

/// The text of an HTTP status failure, and whether it is final.
pub(crate) fn http_failure(status: reqwest::StatusCode) -> DeliveryError {
    if status == reqwest::StatusCode::GONE {
        DeliveryError::Gone(format!(
            "HTTP {status}: the endpoint is gone; it gets no more deliveries"
        ))
    } else {
        DeliveryError::Retry(format!("HTTP {status}"))
    }
}

/// A transport failure as text without the URL (which may hold a token).
pub(crate) fn transport_failure(err: reqwest::Error) -> DeliveryError {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    DeliveryError::Retry(format!("{kind}: {}", err.without_url()))
}

/// The fingerprint of an endpoint's URL: the first 16 hex digits of its
/// SHA-256.
pub(crate) fn url_fingerprint(url: &url::Url) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(url.as_str().as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}
