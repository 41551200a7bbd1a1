//! GBNF and JSON text: literals, rule names, repetition suffixes.

use serde_json::Value;

/// `value` as compact JSON.
pub(super) fn compact(value: &Value) -> String {
    value.to_string()
}

/// A JSON string literal for a key or name.
pub(super) fn compact_key(key: &str) -> String {
    Value::String(key.to_owned()).to_string()
}

/// A GBNF string literal matching exactly `text`.
pub(super) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7F => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A rule name from a hint: ASCII letters, digits and `-` only.
pub(super) fn rule_name(hint: &str) -> String {
    let mut name: String = hint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-');
    if name.is_empty() || name == "root" {
        format!("r-{name}")
    } else {
        name.to_owned()
    }
}

/// A repetition suffix: `*`, `{m,}`, `{m,n}`.
pub(super) fn repeat(min: u64, max: Option<u64>) -> String {
    match (min, max) {
        (0, None) => "*".to_owned(),
        (1, None) => "+".to_owned(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) => format!("{{{m},{}}}", n.max(m)),
    }
}
