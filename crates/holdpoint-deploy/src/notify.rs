//! The file's notifications (`[notify]`): the worker that delivers the
//! store's outbox, its expiry and escalation timers answered by the served
//! agents, its deliveries counted in the server's `/metrics`.

use std::sync::Arc;

use async_trait::async_trait;
use holdpoint::agent::Agent;
use holdpoint::session::SessionStore;
use holdpoint_notify::{DeliveryObserver, ExpireOutcome, HoldActions, HoldRef, Notifier, WorkerHandle};

use crate::config::Config;
use crate::error::DeployError;

/// Answers expired holds with the agent that holds them.
struct ServedAgents(Vec<Agent>);

impl ServedAgents {
    /// The agent `hold` names (any served agent when it names none).
    fn holding(&self, hold: &HoldRef) -> holdpoint::Result<&Agent> {
        self.0
            .iter()
            .find(|a| hold.agent.as_deref().is_none_or(|name| a.name() == name))
            .ok_or_else(|| {
                holdpoint::Error::FailedPrecondition(format!(
                    "no served agent holds {}",
                    hold.agent.as_deref().unwrap_or("this hold")
                ))
            })
    }
}

#[async_trait]
impl HoldActions for ServedAgents {
    async fn expire(&self, hold: &HoldRef) -> holdpoint::Result<ExpireOutcome> {
        self.holding(hold)?.expire(hold).await
    }

    async fn escalate(&self, hold: &HoldRef, roles: &[String]) -> holdpoint::Result<()> {
        self.holding(hold)?.escalate(hold, roles).await
    }
}

/// The worker's reports, recorded in the server's metrics (`/metrics`).
struct ServerMetrics(holdpoint_server::Metrics);

impl DeliveryObserver for ServerMetrics {
    fn delivered(&self, channel: &str, delay: std::time::Duration) {
        self.0.notification_delivered(channel, delay);
    }

    fn failed(&self, channel: &str) {
        self.0.notification_failed(channel);
    }

    fn dead(&self, kind: &str) {
        self.0.notification_dead(kind);
    }

    fn stopped(&self, channel: &str) {
        self.0.notification_endpoint_stopped(channel);
    }

    fn unrouted(&self, kind: &str) {
        self.0.notification_unrouted(kind);
    }
}

/// Starts the notification worker over `store` when the file configures a
/// channel or an approval rule with a timer (`None` otherwise: nothing
/// would be delivered and no timer is stamped); expiry and escalation
/// timers are answered by the served `agents`, and deliveries are counted
/// in `metrics` (the server's `/metrics`).
///
/// A rule's `expire_after` or `escalate_after` acts through this worker
/// even with no channel: the hold is denied, expired or escalated on time,
/// and the event no channel takes is settled `cancelled` (unrouted).
pub fn start_notifications(
    config: &Config,
    store: Arc<dyn SessionStore>,
    agents: Vec<Agent>,
    metrics: &holdpoint_server::Metrics,
) -> Result<Option<WorkerHandle>, DeployError> {
    let settings = config.notify();
    let no_timer = config.approval_rules().iter().all(|rule| rule.timers.is_empty());
    if !config.has_channel() && no_timer {
        return Ok(None);
    }
    let notifier = Notifier::new(settings.clone()).map_err(|source| DeployError::Notify {
        file: config.file().to_owned(),
        source,
    })?;
    let worker = holdpoint_notify::Worker::new(store, notifier)
        .map_err(|source| DeployError::NotifyStore {
            file: config.file().to_owned(),
            source,
        })?
        .actions(Arc::new(ServedAgents(agents)))
        .observer(Arc::new(ServerMetrics(metrics.clone())));
    Ok(Some(worker.spawn()))
}
