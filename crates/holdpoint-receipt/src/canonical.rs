//! The canonical JSON form of a tool's input and its SHA-256: the same
//! form Holdpoint's audit trail hashes (`input_hash`, docs/reference.md
//! §11.1), so a receipt's `inputSha256` equals the audit record's hash.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes a number with one spelling per value: a float with an integral
/// value in the range of `i64`/`u64` as that integer (`500.0` → `500`,
/// `1e16` → `10000000000000000`); integers as they are; any other float in
/// its shortest round-trip form.
fn write_number(n: &serde_json::Number, out: &mut String) {
    use std::fmt::Write as _;
    const I64_MIN: f64 = -9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    if let Some(f) = n.as_f64().filter(|_| n.is_f64())
        && f.is_finite()
        && f.fract() == 0.0
    {
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

/// JSON with object keys sorted (by their UTF-8 bytes) at every level, no
/// whitespace, strings escaped as `serde_json` writes them, and one
/// spelling per number.
///
/// ```
/// use serde_json::json;
/// assert_eq!(
///     holdpoint_receipt::canonical_json(&json!({"to": "acct-1", "amount": 500.0})),
///     r#"{"amount":500,"to":"acct-1"}"#
/// );
/// ```
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

/// SHA-256, in lowercase hex, of the [`canonical_json`] form of `input`.
pub fn input_sha256(input: &Value) -> String {
    let digest = Sha256::digest(canonical_json(input).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_spelling_per_value() {
        assert_eq!(
            input_sha256(&json!({"a": 1, "b": 2})),
            input_sha256(&json!({"b": 2, "a": 1.0}))
        );
        assert_ne!(input_sha256(&json!({"a": 1})), input_sha256(&json!({"a": 1.5})));
        assert_eq!(
            canonical_json(&json!({"b": [1e16, -3.0, 0.25], "a": {"z": null, "y": "é\n"}})),
            r#"{"a":{"y":"é\n","z":null},"b":[10000000000000000,-3,0.25]}"#
        );
        // Pinned: the hash another implementation must reproduce.
        assert_eq!(
            input_sha256(&json!({"amount": 500.0, "to": "acct-4471"})),
            "8499f97e00e5d2243ee95ae66badf4ed46968999d6061ad28364a504ea326b29"
        );
    }
}
