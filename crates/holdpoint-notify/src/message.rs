//! What a delivery says: the Standard Webhooks payload and the readable
//! summary Slack and email render (the same content and link).

use chrono::{DateTime, SecondsFormat, Utc};
use holdpoint::session::OutboxEvent;
use holdpoint::session::outbox::{
    HOLD_CREATED, HOLD_DECIDED, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT, HOLD_PARTIALLY_APPROVED, HOLD_REMINDED,
    hold_summary, readable_input,
};
use serde_json::{Map, Value, json};

/// One event as the channels deliver it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The outbox row's id: the idempotency key (`webhook-id`).
    pub id: String,
    /// The event type.
    pub kind: String,
    /// When the event happened (the row's creation; the same on every retry).
    pub timestamp: DateTime<Utc>,
    /// The payload's `data`, `url` included.
    pub data: Value,
    /// The link to the hold in the inbox, when `public_url` is set.
    pub url: Option<String>,
}

impl Notification {
    /// The notification of `event`, its link under `public_url`.
    pub fn of(event: &OutboxEvent, public_url: Option<&url::Url>) -> Self {
        let url = public_url.map(|base| link(base, event));
        let mut data = event.data.clone();
        if let Some(obj) = data.as_object_mut() {
            obj.insert("url".into(), url.clone().map_or(Value::Null, Value::String));
        }
        Notification {
            id: event.id.clone(),
            kind: event.kind.clone(),
            timestamp: event.created_at,
            data,
            url,
        }
    }

    /// The approver roles the data names.
    pub fn approvers(&self) -> Vec<String> {
        self.data
            .get("approvers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The held tool.
    pub fn tool(&self) -> &str {
        self.data.get("tool").and_then(Value::as_str).unwrap_or("a tool call")
    }

    /// The hold's expiry as written, when it has one.
    pub fn expires_at(&self) -> Option<&str> {
        self.data.get("expiresAt").and_then(Value::as_str)
    }

    /// What is at stake, in one line (`"$18,300.00 → acct-4471"`): the same
    /// words the inbox shows for the hold — the tool's preview summary
    /// when it made one, else the line built from the (redacted) input
    /// ([`hold_summary`](holdpoint::session::outbox::hold_summary)).
    pub fn summary(&self) -> String {
        match self
            .data
            .get("preview")
            .and_then(|p| p.get("summary"))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => s.to_owned(),
            None => hold_summary(self.tool(), self.data.get("input").unwrap_or(&Value::Null)),
        }
    }

    /// A one-line title: what happened to which call, and what is at
    /// stake when the input says (`"Approval needed: transferMoney — $18,300.00 → acct-4471"`).
    pub fn title(&self) -> String {
        let summary = self.summary();
        let tool = if summary == self.tool() {
            self.tool().to_owned()
        } else {
            format!("{} — {summary}", self.tool())
        };
        match self.kind.as_str() {
            HOLD_CREATED => format!("Approval needed: {tool}"),
            HOLD_REMINDED => format!("Reminder: approval still needed for {tool}"),
            HOLD_ESCALATED => format!("Escalated: approval needed for {tool}"),
            HOLD_EXPIRED => format!("Expired: the hold on {tool} was not answered in time"),
            HOLD_DECIDED => format!("Decided: {tool} ({})", self.decision().unwrap_or("answered")),
            HOLD_PARTIALLY_APPROVED => format!("Partly approved: {tool}"),
            HOLD_IN_DOUBT => "In doubt: a resumed call may or may not have run".to_owned(),
            other => format!("{other}: {tool}"),
        }
    }

    fn decision(&self) -> Option<&str> {
        self.data
            .get("decisions")
            .and_then(Value::as_array)
            .and_then(|d| d.last())
            .and_then(|d| d.get("decision"))
            .and_then(Value::as_str)
    }

    /// The call's input as `key: value` lines (one line for a non-object).
    pub fn readable_input(&self) -> Vec<String> {
        readable_input(self.data.get("input").unwrap_or(&Value::Null))
    }

    /// The summary's lines, in order: tool, input, approvers, expiry,
    /// decision, link.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("Tool: {}", self.tool())];
        let input = self.readable_input();
        if !input.is_empty() {
            out.push("Input:".to_owned());
            out.extend(input.into_iter().map(|l| format!("  {l}")));
        }
        let approvers = self.approvers();
        if !approvers.is_empty() {
            out.push(format!("Who may approve: {}", approvers.join(", ")));
        }
        if let Some(at) = self.expires_at() {
            out.push(format!("Expires: {at}"));
        }
        if let Some(d) = self.decision() {
            out.push(format!("Decision: {d}"));
        }
        if let Some(url) = &self.url {
            out.push(format!("Open: {url}"));
        }
        out
    }
}

/// The link to the hold: the approval page at `public_url`, with the agent,
/// session, snapshot and ref in the query.
fn link(base: &url::Url, event: &OutboxEvent) -> String {
    let mut url = base.clone();
    {
        let mut q = url.query_pairs_mut();
        if let Some(agent) = &event.agent {
            q.append_pair("agent", agent);
        }
        q.append_pair("sessionId", &event.session_id);
        q.append_pair("snapshotId", &event.snapshot_id);
        if let Some(r) = event.reference() {
            q.append_pair("ref", r);
        }
    }
    url.to_string()
}

/// The Standard Webhooks payload: `{"type", "timestamp", "data"}`.
pub fn payload(n: &Notification) -> Value {
    let mut data = match &n.data {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    data.entry("url").or_insert(Value::Null);
    json!({
        "type": n.kind,
        "timestamp": n.timestamp.to_rfc3339_opts(SecondsFormat::Millis, true),
        "data": Value::Object(data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(data: Value) -> Notification {
        Notification {
            id: "evt-1".into(),
            kind: HOLD_CREATED.into(),
            timestamp: Utc::now(),
            data,
            url: None,
        }
    }

    #[test]
    fn the_tools_preview_is_the_headline_and_the_masked_input_is_what_is_listed() {
        // As the outbox writes a hold of a tool with a preview and a
        // redacted path (docs/reference.md §22).
        let n = hold(json!({
            "tool": "payVendor",
            "input": {"vendor": "acme", "card": "[redacted]"},
            "preview": {"summary": "Pay $40.00 to acme"},
        }));
        assert_eq!(n.summary(), "Pay $40.00 to acme");
        assert!(n.title().contains("Pay $40.00 to acme"), "{}", n.title());
        assert!(n.readable_input().contains(&"card: [redacted]".to_owned()));
        let slack = crate::slack::blocks(&n).to_string();
        assert!(
            slack.contains("Pay $40.00 to acme") && slack.contains("[redacted]"),
            "{slack}"
        );
        // Without a preview, the line built from the input.
        let plain = hold(json!({"tool": "payVendor", "input": {"amount": 40, "vendor": "acme"}}));
        assert_eq!(plain.summary(), "$40.00 · acme");
    }
}
