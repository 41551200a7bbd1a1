//! Standard Webhooks delivery: a JSON POST signed with the endpoint's
//! secret (`webhook-id`, `webhook-timestamp`, `webhook-signature`), signed
//! by the Standard Webhooks project's own implementation.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use crate::channel::{Channel, DeliveryError, Route, http_failure, transport_failure};
use crate::message::{Notification, payload};

pub(crate) struct WebhookChannel {
    pub id: String,
    pub url: url::Url,
    pub signer: standardwebhooks::Webhook,
    pub client: reqwest::Client,
    pub route: Route,
    /// Set once the endpoint answered 410: it gets nothing more.
    pub gone: AtomicBool,
}

#[async_trait]
impl Channel for WebhookChannel {
    fn id(&self) -> &str {
        &self.id
    }

    fn serves(&self, n: &Notification) -> bool {
        self.route.serves(n)
    }

    async fn deliver(&self, n: &Notification) -> Result<(), DeliveryError> {
        if self.gone.load(Ordering::Relaxed) {
            return Err(DeliveryError::Gone("the endpoint answered 410 before".into()));
        }
        let body = serde_json::to_vec(&payload(n))
            .map_err(|e| DeliveryError::Retry(format!("the payload does not encode: {e}")))?;
        let timestamp = chrono::Utc::now().timestamp();
        let signature = self
            .signer
            .sign(&n.id, timestamp, &body)
            .map_err(|e| DeliveryError::Retry(format!("cannot sign: {e}")))?;
        let response = self
            .client
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &n.id)
            .header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string())
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(body)
            .send()
            .await
            .map_err(transport_failure)?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let failure = http_failure(status);
        if matches!(failure, DeliveryError::Gone(_)) {
            self.gone.store(true, Ordering::Relaxed);
        }
        Err(failure)
    }
}
