//! Slack incoming webhooks: a Block Kit message with the tool, the readable
//! input, who may approve, the expiry and a link to the hold.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::channel::{Channel, DeliveryError, Route, http_failure, transport_failure, url_fingerprint};
use crate::message::Notification;

pub(crate) struct SlackChannel {
    pub id: String,
    pub url: url::Url,
    pub client: reqwest::Client,
    pub route: Route,
}

/// Escapes the three characters Slack's mrkdwn treats as control.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The Block Kit message of `n`.
pub(crate) fn blocks(n: &Notification) -> Value {
    let mut fields = vec![json!({"type": "mrkdwn", "text": format!("*Tool*\n{}", escape(n.tool()))})];
    let approvers = n.approvers();
    if !approvers.is_empty() {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Who may approve*\n{}", escape(&approvers.join(", ")))}));
    }
    if let Some(at) = n.expires_at() {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Expires*\n{}", escape(at))}));
    }
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": n.title()}}),
        json!({"type": "section", "fields": fields}),
    ];
    let input = n.readable_input();
    if !input.is_empty() {
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": format!("*Input*\n```{}```", escape(&input.join("\n")))}
        }));
    }
    if let Some(url) = &n.url {
        blocks.push(json!({
            "type": "actions",
            "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open in the inbox"}, "url": url}]
        }));
    }
    json!({"text": format!("{}\n{}", n.title(), n.lines().join("\n")), "blocks": blocks})
}

#[async_trait]
impl Channel for SlackChannel {
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
        let response = self
            .client
            .post(self.url.clone())
            .json(&blocks(n))
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
