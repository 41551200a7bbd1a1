//! The audit trail (docs/reference.md §11.1): its records and the hash of the inputs
//! they are about.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::hold::ReplyShape;
use crate::message::metadata::{self, TOOL_APPROVED};
use crate::message::{Part, canonical_json};

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
    /// A tool's own interrupt was restarted with resume data that the tool
    /// declares no yes or no for.
    Restart,
    /// The call was restarted with a replaced input: the new input and its
    /// hash are recorded beside the original. Not an approval of either
    /// input (a gate holds the revised call again).
    Edit,
    /// The answer came after the interrupt's `expiresAt` (wire name
    /// `expire`; `expired`, as older records spell it, still reads).
    #[serde(rename = "expire", alias = "expired")]
    Expired,
    /// A new user message continued the session instead of an answer: the
    /// call was never run, and its snapshot can no longer be resumed (wire
    /// name `abandon`; `abandoned`, as older records spell it, still reads).
    #[serde(rename = "abandon", alias = "abandoned")]
    Abandoned,
    /// The session's owner withdrew their own request before anyone
    /// answered it: the call was never run, and the model is told it was
    /// withdrawn (docs/reference.md §10.7).
    Withdraw,
}

impl AuditDecision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditDecision::Approve => "approve",
            AuditDecision::Deny => "deny",
            AuditDecision::Respond => "respond",
            AuditDecision::Restart => "restart",
            AuditDecision::Edit => "edit",
            AuditDecision::Expired => "expire",
            AuditDecision::Abandoned => "abandon",
            AuditDecision::Withdraw => "withdraw",
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
    /// process died (docs/reference.md §8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settles: bool,
    /// The MCP server and tool behind `tool`, when the agent's tool came
    /// from an MCP server (docs/reference.md §17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpOrigin>,
    /// The standing grant that let the call run without a hold
    /// (docs/reference.md §10.9): its id and who granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::hold::GrantRef>,
}

/// The MCP server and the server's own name of a tool (the agent's name
/// for it is `{server}_{tool}` or as configured), read from the `mcp`
/// entry of the tool definition's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpOrigin {
    /// The server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
}

impl McpOrigin {
    /// The origin a tool definition's metadata names, if it names one.
    pub fn of_metadata(metadata: Option<&serde_json::Map<String, Value>>) -> Option<McpOrigin> {
        let mcp = metadata?.get("mcp")?;
        Some(McpOrigin {
            server: mcp.get("server")?.as_str()?.to_owned(),
            tool: mcp.get("tool")?.as_str()?.to_owned(),
        })
    }
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

/// What the restart directive `d` decides about the paused `target`, and
/// the reason it gives: `expired` past the hold's `expiresAt`; `edit` when
/// it replaced the input (neither input is approved by it: a gate holds
/// the revised call again); `approve` / `deny` by the tool's declared
/// [`ReplyShape`] or a gate's `toolApproved`; else `restart`.
pub(crate) fn restart_decision(target: &Part, d: &Part, now: DateTime<Utc>) -> (AuditDecision, Option<String>) {
    // Borrowed: a bare flag, or anything that is not an object, reads as
    // no data.
    let empty = serde_json::Map::new();
    let data = metadata::marker_object(d.metadata.as_ref(), metadata::RESUMED).unwrap_or(&empty);
    let reason = data.get("reason").and_then(Value::as_str).map(str::to_owned);
    if target.expires_at().is_some_and(|t| t <= now) {
        return (AuditDecision::Expired, reason);
    }
    if d.meta(metadata::REPLACED_INPUT).is_some() {
        return (AuditDecision::Edit, reason);
    }
    // A denial the owner marked withdrawn (`Decisions::answer` with
    // `withdraw`) is audited as such.
    let no = if d.meta(metadata::WITHDRAWN) == Some(&Value::Bool(true)) {
        AuditDecision::Withdraw
    } else {
        AuditDecision::Deny
    };
    if let Some((yes, why)) = ReplyShape::on(target).and_then(|shape| shape.read(data)) {
        let decision = if yes { AuditDecision::Approve } else { no };
        return (decision, why);
    }
    if target.interrupted_by().is_some() || data.contains_key(TOOL_APPROVED) {
        let decision = if data.get(TOOL_APPROVED) == Some(&Value::Bool(true)) {
            AuditDecision::Approve
        } else {
            no
        };
        return (decision, reason);
    }
    (AuditDecision::Restart, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_say_what_they_were_and_old_spellings_still_read() {
        for (d, wire) in [
            (AuditDecision::Approve, "approve"),
            (AuditDecision::Deny, "deny"),
            (AuditDecision::Edit, "edit"),
            (AuditDecision::Respond, "respond"),
            (AuditDecision::Restart, "restart"),
            (AuditDecision::Expired, "expire"),
            (AuditDecision::Abandoned, "abandon"),
            (AuditDecision::Withdraw, "withdraw"),
        ] {
            assert_eq!(serde_json::to_value(d).unwrap(), json!(wire));
            assert_eq!(d.as_str(), wire);
            assert_eq!(serde_json::from_value::<AuditDecision>(json!(wire)).unwrap(), d);
        }
        assert_eq!(
            serde_json::from_value::<AuditDecision>(json!("expired")).unwrap(),
            AuditDecision::Expired
        );
        assert_eq!(
            serde_json::from_value::<AuditDecision>(json!("abandoned")).unwrap(),
            AuditDecision::Abandoned
        );
    }

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
