//! Combining schemas: an `anyOf`/`oneOf` option with its siblings, and
//! `allOf` members into one.

use serde_json::{Map, Value};

/// An `anyOf`/`oneOf` option with the keywords of the schema around it
/// (other than the list itself), as JSON Schema reads them together.
pub(super) fn merge_siblings(parent: &Map<String, Value>, option: &Value, list_key: &str) -> Value {
    let Value::Object(option) = option else {
        return option.clone();
    };
    let mut merged: Map<String, Value> = parent
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "anyOf" | "oneOf" | "allOf" | "enum" | "const" | "description" | "title"
            ) && k.as_str() != list_key
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    merge_into(&mut merged, option);
    Value::Object(merged)
}

/// Merges `extra` into `base`: `properties` and `required` are combined,
/// other keywords of `extra` win.
pub(super) fn merge_into(base: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        match (key.as_str(), base.get_mut(key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (k, v) in theirs {
                    mine.insert(k.clone(), v.clone());
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for v in theirs {
                    if !mine.contains(v) {
                        mine.push(v.clone());
                    }
                }
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}
