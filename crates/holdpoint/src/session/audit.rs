//! The audit trail (SPEC §9.7) and the queries behind pending-approval
//! listings (SPEC §9.8).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What was decided about a paused call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditDecision {
    /// An approval gate's hold was approved.
    Approve,
    /// An approval gate's hold was denied (or restarted without approval).
    Deny,
    /// The call was answered with an output, without running the tool.
    Respond,
    /// A tool's own interrupt was restarted with resume data.
    Restart,
    /// The answer came after the interrupt's `expiresAt`.
    Expired,
}

impl AuditDecision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditDecision::Approve => "approve",
            AuditDecision::Deny => "deny",
            AuditDecision::Respond => "respond",
            AuditDecision::Restart => "restart",
            AuditDecision::Expired => "expired",
        }
    }
}

/// One decision about one paused call, appended when the resume is claimed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// The record's id.
    pub id: String,
    /// When the decision was recorded.
    pub at: DateTime<Utc>,
    /// The principal on whose behalf it was decided (`None` in-process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The individual who decided, when the caller names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The session.
    pub session_id: String,
    /// The snapshot that held the paused call.
    pub snapshot_id: String,
    /// The tool.
    pub tool: String,
    /// The call's ref.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// SHA-256 (hex) of the canonical JSON of the call's input.
    pub input_hash: String,
    /// The decision.
    pub decision: AuditDecision,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The middleware that raised the hold (absent for a tool's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
}

/// Which audit records to list (all filters combine; newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only decisions by this principal.
    pub principal: Option<String>,
    /// At most this many (default 100).
    pub limit: Option<usize>,
}

impl AuditQuery {
    /// Whether `record` passes the filters.
    pub fn matches(&self, record: &AuditRecord) -> bool {
        self.agent.as_ref().is_none_or(|a| record.agent.as_ref() == Some(a))
            && self.session_id.as_ref().is_none_or(|s| &record.session_id == s)
            && self
                .principal
                .as_ref()
                .is_none_or(|p| record.principal.as_ref() == Some(p))
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// Which snapshots to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotQuery {
    /// Only those written by this agent.
    pub agent: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// Only those owned by this principal.
    pub owner: Option<String>,
    /// Only the latest snapshot of each session, when it is a completed,
    /// interrupted, not yet resumed one: the sessions waiting for an answer.
    pub waiting_only: bool,
    /// At most this many (default 100), newest first.
    pub limit: Option<usize>,
}

impl SnapshotQuery {
    /// Whether `snapshot` passes the row filters (not `waiting_only`'s
    /// latest-per-session rule, which needs the whole session).
    pub fn matches_row(&self, s: &super::Snapshot) -> bool {
        self.agent.as_ref().is_none_or(|a| s.agent.as_ref() == Some(a))
            && self.session_id.as_ref().is_none_or(|id| &s.session_id == id)
            && self.owner.as_ref().is_none_or(|o| s.owner.as_ref() == Some(o))
            && (!self.waiting_only || s.is_waiting())
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// JSON with object keys sorted at every level and no whitespace: the form
/// hashed for audit records and signed for client-held state.
pub fn canonical_json(value: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    if let Some(child) = map.get(*k) {
                        write(child, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            Value::Number(n) => match n.as_f64() {
                // One spelling per value: 500.0 and 500 hash and sign alike.
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => out.push_str(&format!("{}", f as i64)),
                _ => out.push_str(&n.to_string()),
            },
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// SHA-256 (hex) of the canonical JSON of `value`.
pub fn hash_json(value: &Value) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(canonical_json(value).as_bytes());
    let mut hex = String::with_capacity(2 * digest.len());
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": "s"}});
        assert_eq!(canonical_json(&a), r#"{"a":{"c":"s","z":[1,{"x":3,"y":2}]},"b":1}"#);
        assert_eq!(hash_json(&json!({"a": 1, "b": 2})), hash_json(&json!({"b": 2, "a": 1})));
        assert_ne!(hash_json(&json!({"a": 1})), hash_json(&json!({"a": 2})));
        assert_eq!(hash_json(&json!({})).len(), 64);
        assert_eq!(hash_json(&json!({"amount": 500})), hash_json(&json!({"amount": 500.0})));
        assert_ne!(hash_json(&json!({"amount": 500})), hash_json(&json!({"amount": 500.5})));
    }
}
