//! What a hold is about, in words: the one line the inbox shows for a
//! hold and notifications put in their title ([`hold_summary`]), and the
//! input as `key: value` lines ([`readable_input`]). One place, so an
//! approver reads the same words in Slack, email and on the page.

use serde_json::Value;

/// Input keys that name an amount of money (shown as `$18,300.00`).
const AMOUNT_WORDS: &[&str] = &[
    "amount", "price", "total", "sum", "balance", "cost", "value", "usd", "eur",
];

/// Input keys that name where something goes (shown as `→ acct-4471`).
const TARGET_WORDS: &[&str] = &["recipient", "payee", "destination", "beneficiary"];

/// The longest string value a summary shows whole.
const MAX_VALUE: usize = 40;

/// The longest summary.
const MAX_SUMMARY: usize = 160;

/// Whether an input key names an amount of money (`amount`, `totalUsd`, …).
pub fn is_amount_key(key: &str) -> bool {
    let key = key.to_lowercase();
    AMOUNT_WORDS.iter().any(|w| key.contains(w))
}

/// Whether an input key names a destination (`to`, `toAccount`,
/// `to_account`, `recipient`, …).
fn is_target_key(key: &str) -> bool {
    let lower = key.to_lowercase();
    key == "to"
        || key
            .strip_prefix("to")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase() || c == '_'))
        || TARGET_WORDS.iter().any(|w| lower.contains(w))
}

/// `18300` → `18,300`; `1234.25` → `1,234.25`; an amount always with
/// its cents: `18300` → `18,300.00`.
pub fn group_thousands(n: f64, amount: bool) -> String {
    let negative = n < 0.0;
    let abs = n.abs();
    let whole = abs.trunc();
    let text = if amount {
        format!("{abs:.2}")
    } else if abs.fract() == 0.0 {
        format!("{whole:.0}")
    } else {
        abs.to_string()
    };
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!(
        "{}{grouped}{}",
        if negative { "-" } else { "" },
        frac.map(|f| format!(".{f}")).unwrap_or_default()
    )
}

/// A value as one readable line: strings bare, the rest as JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A call's input as `key: value` lines (one line for a non-object, none
/// for no input): what a notification lists under "Input".
pub fn readable_input(input: &Value) -> Vec<String> {
    match input {
        Value::Null => Vec::new(),
        Value::Object(map) => map.iter().map(|(k, v)| format!("{k}: {}", scalar(v))).collect(),
        other => vec![scalar(other)],
    }
}

/// What is at stake in a held call, in one line built from its input:
/// amounts first as money, then where it goes, then the other short
/// values — `"$18,300.00 → acct-4471 · rent"` for
/// `{"amount": 18300, "toAccount": "acct-4471", "memo": "rent"}`. Falls
/// back to the tool's name when the input says nothing readable.
///
/// ```
/// use holdpoint::session::outbox::hold_summary;
/// use serde_json::json;
/// let input = json!({"toAccount": "acct-4471", "amount": 18300, "memo": "rent"});
/// assert_eq!(hold_summary("transferMoney", &input), "$18,300.00 → acct-4471 · rent");
/// assert_eq!(hold_summary("closeAccount", &json!({"account": "acct-1"})), "acct-1");
/// assert_eq!(hold_summary("ping", &json!(null)), "ping");
/// ```
pub fn hold_summary(tool: &str, input: &Value) -> String {
    let mut amounts = Vec::new();
    let mut targets = Vec::new();
    let mut rest = Vec::new();
    match input {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::Number(n) => {
                        let n = n.as_f64().unwrap_or(0.0);
                        if is_amount_key(key) {
                            amounts.push(format!("${}", group_thousands(n, true)));
                        } else {
                            rest.push(format!("{key} {}", group_thousands(n, false)));
                        }
                    }
                    Value::String(s) if !s.trim().is_empty() => {
                        let s = clip(s.trim(), MAX_VALUE);
                        if is_target_key(key) {
                            targets.push(format!("→ {s}"));
                        } else {
                            rest.push(s);
                        }
                    }
                    Value::Bool(b) => rest.push(format!("{key} {}", if *b { "yes" } else { "no" })),
                    _ => {}
                }
            }
        }
        Value::String(s) if !s.trim().is_empty() => rest.push(clip(s.trim(), MAX_VALUE)),
        Value::Number(n) => rest.push(group_thousands(n.as_f64().unwrap_or(0.0), false)),
        _ => {}
    }
    let head = amounts.into_iter().chain(targets).collect::<Vec<_>>().join(" ");
    let parts: Vec<String> = std::iter::once(head).filter(|h| !h.is_empty()).chain(rest).collect();
    if parts.is_empty() {
        return tool.to_owned();
    }
    clip(&parts.join(" · "), MAX_SUMMARY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn amounts_group_and_keep_cents() {
        assert_eq!(group_thousands(18300.0, true), "18,300.00");
        assert_eq!(group_thousands(25000.5, true), "25,000.50");
        assert_eq!(group_thousands(999.0, false), "999");
        assert_eq!(group_thousands(-1234567.0, false), "-1,234,567");
        assert_eq!(group_thousands(1234.25, false), "1,234.25");
    }

    #[test]
    fn a_summary_says_what_is_at_stake() {
        let s = hold_summary(
            "t",
            &json!({"amount": 1200.75, "to_account": "acct-9", "urgent": true, "n": 3}),
        );
        assert_eq!(s, "$1,200.75 → acct-9 · urgent yes · n 3");
        assert_eq!(hold_summary("t", &json!({"tomato": "red"})), "red");
        assert_eq!(readable_input(&json!({"a": 1, "b": "x"})), ["a: 1", "b: x"]);
        assert!(hold_summary("t", &json!({"memo": "x".repeat(500)})).chars().count() <= MAX_VALUE);
    }
}
