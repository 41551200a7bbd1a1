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
    /// An approval gate's hold was approved, with the input it held: the
    /// call runs as it was shown.
    Approve,
    /// An approval gate's hold was denied (or restarted without approval),
    /// with the input it held.
    Deny,
    /// The call was answered with an output, without running the tool.
    Respond,
    /// A tool's own interrupt was restarted with resume data; or a
    /// middleware's hold was restarted with a replaced input, which is not
    /// an approval of either input (ToolApproval holds the revised call
    /// again).
    Restart,
    /// The answer came after the interrupt's `expiresAt`.
    Expired,
    /// A new user message continued the session instead of an answer: the
    /// call was never run, and its snapshot can no longer be resumed.
    Abandoned,
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
            AuditDecision::Abandoned => "abandoned",
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
    /// SHA-256 (hex) of the canonical JSON of the input the decision is
    /// about: the held call's input, or, for a restart that replaced it
    /// (`replacedInput`), the new input the call runs with (or is held
    /// again with). Never the hash of an input that a restart replaced.
    pub input_hash: String,
    /// The new input of a restart that replaced the call's input (what
    /// runs, or what the gate holds again); absent when the input was kept,
    /// whose value is in the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The held call's input, when a restart replaced it (`input` is then
    /// what replaced it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_input: Option<Value>,
    /// SHA-256 (hex) of the canonical JSON of `original_input`: present
    /// exactly when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_input_hash: Option<String>,
    /// The decision.
    pub decision: AuditDecision,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The middleware that raised the hold (absent for a tool's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
    /// Whether this decision settled a call left in doubt by a resume whose
    /// process died (SPEC §9.3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settles: bool,
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
    /// Only the latest snapshot of each session, when a resume claimed it
    /// and the claim lapsed: the sessions whose calls are in doubt
    /// (SPEC §9.3; see [`Snapshot::resume_lapsed`](super::Snapshot::resume_lapsed)).
    /// A resume that detached and died leaves an unfinished pending row
    /// after the snapshot it claimed; that row does not count as newer (see
    /// [`Snapshot::is_unfinished_successor_of`](super::Snapshot::is_unfinished_successor_of)).
    pub in_doubt_only: bool,
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
            && (!self.in_doubt_only || s.resume_lapsed(chrono::Utc::now()))
    }

    /// Whether only the latest snapshot of each session may match.
    pub fn latest_only(&self) -> bool {
        self.waiting_only || self.in_doubt_only
    }

    /// The effective limit.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(100)
    }
}

/// Writes a number with one spelling per value, whatever JSON form it came
/// in: a float with an integral value in the range of `i64`/`u64` is written
/// as that integer (`500.0` → `500`, `1e16` → `10000000000000000`, as a
/// JavaScript client re-serialises them); integers as they are; any other
/// float in its shortest round-trip form (`0.25`, `1.5e+300`).
fn write_number(n: &serde_json::Number, out: &mut String) {
    use std::fmt::Write as _;
    // 2^63 and 2^64, exactly representable as f64.
    const I64_MIN: f64 = -9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    if let Some(f) = n.as_f64().filter(|_| n.is_f64())
        && f.is_finite()
        && f.fract() == 0.0
    {
        // Integral and in range: the casts are exact. -0.0 is in the first
        // range (it equals 0.0) and is written as 0.
        if (0.0..U64_END).contains(&f) {
            let _ = write!(out, "{}", f as u64);
            return;
        }
        if (I64_MIN..0.0).contains(&f) {
            let _ = write!(out, "{}", f as i64);
            return;
        }
    }
    let _ = write!(out, "{n}");
}

/// JSON with object keys sorted at every level and no whitespace: the form
/// hashed for audit records and signed for client-held state. Numbers have
/// one spelling per value (see `write_number`): `500.0` and `500`, `1e16`
/// and `10000000000000000` are the same.
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
            Value::Number(n) => write_number(n, out),
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

    #[test]
    fn integral_floats_canonicalise_as_integers_across_the_integer_range() {
        let same = |a: &str, b: &str| {
            let (a, b): (Value, Value) = (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
            assert_eq!(canonical_json(&a), canonical_json(&b), "{a} vs {b}");
            assert_eq!(hash_json(&a), hash_json(&b));
        };
        // What a JavaScript client writes back for these floats.
        same("1e16", "10000000000000000");
        same("1.0e16", "10000000000000000");
        same("-1e16", "-10000000000000000");
        same("9007199254740993.0", "9007199254740992");
        same("1e19", "10000000000000000000");
        same("-9.223372036854775808e18", "-9223372036854775808");
        same("500.0", "500");
        same("-0.0", "0");
        assert_eq!(canonical_json(&json!(1e16)), "10000000000000000");
        assert_eq!(canonical_json(&json!([-0.0, 0.0, -7.0])), "[0,0,-7]");
        // Past u64 (and below i64) floats keep their shortest round-trip form,
        // and parse back to the same value from either spelling.
        same("2e19", "20000000000000000000");
        same("1e21", "1e+21");
        assert_eq!(canonical_json(&json!(2e19)), "2e+19");
        assert_eq!(canonical_json(&json!(-1e19)), "-1e+19");
        // Fractions are untouched.
        assert_eq!(canonical_json(&json!(0.1)), "0.1");
        assert_eq!(canonical_json(&json!(1e-7)), "1e-7");
        assert_ne!(hash_json(&json!(1e16)), hash_json(&json!(1.0000000000000002e16)));
    }

    /// The canonical form of ordinary values, pinned: audit hashes and
    /// signatures made by earlier releases stay valid.
    #[test]
    fn canonical_form_of_ordinary_values_is_stable() {
        let v = json!({"b": [1, -2, 500.0, 0.25, -0.0, 1.5e300, 1e-7, 123456789012.0], "a": {"t": true, "n": null, "s": "x\"y\u{e9}"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"n":null,"s":"x\"yé","t":true},"b":[1,-2,500,0.25,0,1.5e+300,1e-7,123456789012]}"#
        );
        assert_eq!(
            hash_json(&v),
            "c51eacd0d5facc95e60a4652ea015373db8e8c5a6b2fd7ddfb0f52b5ae32eae1"
        );
    }
}
