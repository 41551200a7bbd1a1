//! The match rules of the conformance format (docs/reference.md §14): contains-matching
//! of objects, ordered-subsequence matching of arrays, exact scalars, and
//! `{{name}}` template resolution.

use std::collections::HashMap;

use serde_json::Value;

/// Checks that `actual` contains `expected`; the error names the path and
/// the first mismatch.
pub fn contains(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match expected {
        Value::Null => Ok(()),
        Value::Object(exp) => {
            let Value::Object(act) = actual else {
                return Err(format!("{path}: expected an object, got {}", short(actual)));
            };
            for (k, v) in exp {
                if v.is_null() {
                    continue;
                }
                let sub = format!("{path}.{k}");
                match act.get(k) {
                    Some(a) => contains(a, v, &sub)?,
                    None => return Err(format!("{sub}: missing (expected {})", short(v))),
                }
            }
            Ok(())
        }
        Value::Array(exp) => {
            let Value::Array(act) = actual else {
                return Err(format!("{path}: expected an array, got {}", short(actual)));
            };
            let mut at = 0;
            for (i, e) in exp.iter().enumerate() {
                let mut found = false;
                while at < act.len() {
                    let ok = contains(&act[at], e, &format!("{path}[{at}]")).is_ok();
                    at += 1;
                    if ok {
                        found = true;
                        break;
                    }
                }
                if !found {
                    return Err(format!(
                        "{path}[{i}]: expected item {} not found in order in {}",
                        short(e),
                        short(actual)
                    ));
                }
            }
            Ok(())
        }
        Value::Number(n) => match actual.as_f64() {
            Some(a) if Some(a) == n.as_f64() => Ok(()),
            _ => Err(format!("{path}: expected {n}, got {}", short(actual))),
        },
        scalar => {
            if actual == scalar {
                Ok(())
            } else {
                Err(format!("{path}: expected {}, got {}", short(scalar), short(actual)))
            }
        }
    }
}

/// Compact JSON for messages, cut to a readable length.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        format!("{}…", &s[..s.floor_char_boundary(300)])
    } else {
        s
    }
}

/// Replaces `{{name}}` references: a whole-string reference keeps the
/// captured value's type; inline ones are substituted as text.
pub fn resolve(value: &Value, captures: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => {
            let trimmed = s.trim();
            if let Some(name) = trimmed.strip_prefix("{{").and_then(|r| r.strip_suffix("}}"))
                && !name.contains("{{")
            {
                return captures
                    .get(name.trim())
                    .cloned()
                    .ok_or_else(|| format!("template reference '{{{{{name}}}}}' not captured"));
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find("{{") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                let Some(end) = after.find("}}") else {
                    out.push_str(&rest[start..]);
                    rest = "";
                    break;
                };
                let name = after[..end].trim();
                let v = captures
                    .get(name)
                    .ok_or_else(|| format!("template reference '{{{{{name}}}}}' not captured"))?;
                match v {
                    Value::String(t) => out.push_str(t),
                    other => out.push_str(&other.to_string()),
                }
                rest = &after[end + 2..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| resolve(i, captures)).collect::<Result<_, _>>()?),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, captures)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}
