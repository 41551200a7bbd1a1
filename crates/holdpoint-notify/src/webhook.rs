//! Standard Webhooks delivery: a JSON POST signed with the endpoint's
//! secret (`webhook-id`, `webhook-timestamp`, `webhook-signature`), signed
//! by the Standard Webhooks project's own implementation.

use async_trait::async_trait;

use crate::channel::{Channel, DeliveryError, Route, http_failure, transport_failure, url_fingerprint};
use crate::message::{Notification, payload};

pub(crate) struct WebhookChannel {
    pub id: String,
    pub url: url::Url,
    pub signer: standardwebhooks::Webhook,
    pub client: reqwest::Client,
    pub route: Route,
}

#[async_trait]
impl Channel for WebhookChannel {
    fn id(&self) -> &str {
        &self.id
    }

    fn fingerprint(&self) -> String {
        url_fingerprint(&self.url)
    }

    fn serves(&self, n: &Notification) -> bool {
        self.route.serves(n)
    }

    async fn deliver(&self, n: &Notification) -> Result<(), DeliveryError> {
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
        Err(http_failure(status))
    }
}
