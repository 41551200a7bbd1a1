//! [`AppState`]: what every handler shares — the agents by name, the
//! authenticator, the limits and the turn tracker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use holdpoint::agent::Agent;

use crate::auth::{Authenticator, Identity};
use crate::error::ApiError;
use crate::hosts::HostPolicy;
use crate::inflight::Turns;
use crate::limits::{BodyTimeout, Limits};
use crate::metrics::Metrics;
use crate::signing::KeyRing;

pub(crate) struct StateInner {
    pub agents: BTreeMap<String, Agent>,
    pub auth: Arc<Authenticator>,
    pub limits: Limits,
    pub turns: Turns,
    pub keys: Arc<KeyRing>,
    pub metrics: Metrics,
    pub metrics_token: Option<String>,
    pub metrics_open: bool,
    pub hosts: Arc<HostPolicy>,
    pub request_timeout: Option<Duration>,
    /// How the approval page signs people in, if it does.
    pub page_login: Option<crate::auth::PageLogin>,
    /// The notification outbox operators see (`None`: not served).
    pub outbox: Option<Arc<dyn holdpoint::session::OutboxStore>>,
    /// The JWKS of the approval receipts' keys (`None`: not published).
    pub receipt_keys: Option<serde_json::Value>,
}

/// The state shared by the server's handlers (cheap to clone).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<StateInner>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("agents", &self.inner.agents.keys().collect::<Vec<_>>())
            .field("limits", &self.inner.limits)
            .finish()
    }
}

impl AppState {
    pub(crate) fn new(inner: StateInner) -> Self {
        AppState { inner: Arc::new(inner) }
    }

    /// The JWKS of the approval receipts' keys, if published.
    pub(crate) fn receipt_keys(&self) -> Option<&serde_json::Value> {
        self.inner.receipt_keys.as_ref()
    }

    /// The agents, by name.
    pub fn agents(&self) -> &BTreeMap<String, Agent> {
        &self.inner.agents
    }

    /// The agent `name`, if `caller` may use it: 404 for an unknown name,
    /// 403 for an agent outside the caller's scope.
    pub fn agent(&self, caller: &Identity, name: &str) -> Result<&Agent, ApiError> {
        let agent = self
            .inner
            .agents
            .get(name)
            .ok_or_else(|| ApiError::not_found(format!("agent \"{name}\" not found")))?;
        caller.check_agent(name)?;
        Ok(agent)
    }

    pub(crate) fn authenticator(&self) -> &Arc<Authenticator> {
        &self.inner.auth
    }

    /// The size limits.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The turn tracker.
    pub fn turns(&self) -> &Turns {
        &self.inner.turns
    }

    /// The state-signing keys.
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.inner.keys
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub(crate) fn metrics_token(&self) -> Option<&str> {
        self.inner.metrics_token.as_deref()
    }

    pub(crate) fn page_login(&self) -> Option<&crate::auth::PageLogin> {
        self.inner.page_login.as_ref()
    }

    pub(crate) fn metrics_open(&self) -> bool {
        self.inner.metrics_open
    }

    /// The notification outbox, when the server serves it.
    pub(crate) fn outbox(&self) -> Option<&Arc<dyn holdpoint::session::OutboxStore>> {
        self.inner.outbox.as_ref()
    }

    pub(crate) fn hosts(&self) -> &Arc<HostPolicy> {
        &self.inner.hosts
    }

    /// How long a request body may take to arrive.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.inner.request_timeout
    }
}

impl FromRef<AppState> for Arc<Authenticator> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.inner.auth)
    }
}

impl FromRef<AppState> for Limits {
    fn from_ref(state: &AppState) -> Self {
        state.inner.limits
    }
}

impl FromRef<AppState> for BodyTimeout {
    fn from_ref(state: &AppState) -> Self {
        BodyTimeout(state.inner.request_timeout)
    }
}
