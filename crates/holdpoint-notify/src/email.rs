//! Email over SMTP with `lettre`: a text and an HTML part with the same
//! content and link as the other channels.

use async_trait::async_trait;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::channel::{Channel, DeliveryError, Route};
use crate::config::{SmtpSpec, SmtpTls};
use crate::error::NotifyError;
use crate::message::Notification;

pub(crate) struct EmailChannel {
    pub id: String,
    pub from: Mailbox,
    pub to: Vec<Mailbox>,
    pub transport: AsyncSmtpTransport<Tokio1Executor>,
    pub route: Route,
}

/// The transport `smtp` describes.
pub(crate) fn transport(
    smtp: &SmtpSpec,
    timeout: std::time::Duration,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, NotifyError> {
    let bad = |e: lettre::transport::smtp::Error| NotifyError::Invalid(format!("notify.smtp: {e}"));
    let mut builder = match smtp.tls {
        SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host)
            .port(smtp.port.unwrap_or(smtp.tls.default_port())),
        SmtpTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.host)
            .map_err(bad)?
            .port(smtp.port.unwrap_or(smtp.tls.default_port())),
        SmtpTls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.host)
            .map_err(bad)?
            .port(smtp.port.unwrap_or(smtp.tls.default_port())),
    };
    builder = builder.timeout(Some(timeout));
    if let (Some(user), Some(password)) = (&smtp.username, &smtp.password) {
        builder = builder.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
    }
    Ok(builder.build())
}

/// A mailbox, or the error naming which setting it came from.
pub(crate) fn mailbox(what: &str, address: &str) -> Result<Mailbox, NotifyError> {
    address
        .parse()
        .map_err(|e| NotifyError::Invalid(format!("{what}: `{address}` is not an email address: {e}")))
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The text and HTML bodies of `n`.
pub(crate) fn bodies(n: &Notification) -> (String, String) {
    let text = format!("{}\n\n{}\n", n.title(), n.lines().join("\n"));
    let mut html = format!(
        "<h2>{}</h2>\n<p><b>Tool:</b> {}</p>\n",
        html_escape(&n.title()),
        html_escape(n.tool())
    );
    let input = n.readable_input();
    if !input.is_empty() {
        html.push_str("<p><b>Input:</b></p>\n<ul>\n");
        for line in input {
            html.push_str(&format!("<li>{}</li>\n", html_escape(&line)));
        }
        html.push_str("</ul>\n");
    }
    let approvers = n.approvers();
    if !approvers.is_empty() {
        html.push_str(&format!(
            "<p><b>Who may approve:</b> {}</p>\n",
            html_escape(&approvers.join(", "))
        ));
    }
    if let Some(at) = n.expires_at() {
        html.push_str(&format!("<p><b>Expires:</b> {}</p>\n", html_escape(at)));
    }
    if let Some(url) = &n.url {
        html.push_str(&format!("<p><a href=\"{0}\">{0}</a></p>\n", html_escape(url)));
    }
    (text, html)
}

#[async_trait]
impl Channel for EmailChannel {
    fn id(&self) -> &str {
        &self.id
    }

    fn serves(&self, n: &Notification) -> bool {
        self.route.serves(n)
    }

    async fn deliver(&self, n: &Notification) -> Result<(), DeliveryError> {
        let (text, html) = bodies(n);
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(n.title())
            .message_id(Some(format!("<{}@holdpoint>", n.id)));
        for to in &self.to {
            builder = builder.to(to.clone());
        }
        let message = builder
            .multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| DeliveryError::Retry(format!("the message does not build: {e}")))?;
        self.transport
            .send(message)
            .await
            .map_err(|e| DeliveryError::Retry(format!("SMTP: {e}")))?;
        Ok(())
    }
}
