//! JSON compared and written with equal numbers equal, whatever their form:
//! comparison ([`json_eq`]) and the canonical text ([`canonical_json`]).

use serde_json::Value;

/// Whether two JSON values are equal, comparing numbers by value: `500`
/// equals `500.0` (clients and browsers re-encode numbers freely), object
/// key order is ignored.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(i), Some(j)) = (x.as_i64(), y.as_i64()) {
                return i == j;
            }
            if let (Some(i), Some(j)) = (x.as_u64(), y.as_u64()) {
                return i == j;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(f), Some(g)) => f == g,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
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
                // Entries sorted by key (keys are unique): no lookup per key.
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (k, child)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    write(child, out);
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
            Value::String(s) => write_str(s, out),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Null => out.push_str("null"),
        }
    }
    let mut out = String::with_capacity(64);
    write(value, &mut out);
    out
}

/// Writes `s` as a JSON string, escaped as serde_json writes it (what a
/// `Value::String`'s `to_string` gives).
fn write_str(s: &str, out: &mut String) {
    // Serialising a string cannot fail.
    if let Ok(quoted) = serde_json::to_string(s) {
        out.push_str(&quoted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(
            &json!({"amount": 500, "to": "x"}),
            &json!({"to": "x", "amount": 500.0})
        ));
        assert!(!json_eq(&json!({"amount": 500}), &json!({"amount": 500.5})));
        assert!(!json_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }
}
