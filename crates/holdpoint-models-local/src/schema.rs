//! Schemas as the prompt and the grammar read them: `$ref`s inlined.
//!
//! Tool schemas come from `schemars` (draft 2020-12, with `$defs` and
//! `$ref`) or from users. The grammar generator and the prompt's argument
//! summary only follow a schema's own keywords, so every `$ref` is first
//! replaced by the schema it points to (`#`, `#/$defs/…`,
//! `#/definitions/…`, any JSON pointer into the root). A recursive
//! reference, or one that cannot be followed (remote, dangling), becomes
//! the empty schema, which accepts any value. The definitions themselves
//! are dropped once inlined.

use serde_json::{Map, Value};

/// How deep a schema may nest; deeper parts accept any value.
const MAX_DEPTH: usize = 64;

/// Keys whose value is one schema (or, for `items`, a list of schemas).
const ONE: &[&str] = &["items", "additionalProperties", "not", "if", "then", "else", "contains"];
/// Keys whose value is a list of schemas.
const LIST: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keys whose value maps names to schemas.
const MAP: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keys that hold definitions (inlined where referenced) or annotations.
const DROPPED: &[&str] = &["$defs", "definitions", "$schema", "$id", "$anchor", "$comment"];

/// `schema` with its `$ref`s inlined (see the [module docs](self)).
pub(crate) fn inline_refs(schema: &Value) -> Value {
    Inliner {
        root: schema,
        following: Vec::new(),
    }
    .walk(schema, 0)
}

/// A tool's input schema, inlined, as an object schema: no schema is an
/// object with no declared properties, and an object schema without
/// `properties` gets an empty map.
pub(crate) fn tool_input(schema: Option<&Value>) -> Value {
    let mut out = schema.map_or_else(|| Value::Object(Map::new()), inline_refs);
    if let Value::Object(obj) = &mut out {
        obj.entry("type").or_insert_with(|| Value::String("object".to_owned()));
        if obj.get("type").and_then(Value::as_str) == Some("object") {
            obj.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        }
    }
    out
}

struct Inliner<'a> {
    root: &'a Value,
    /// The references being inlined, outermost first (to stop recursion).
    following: Vec<String>,
}

impl Inliner<'_> {
    fn walk(&mut self, node: &Value, depth: usize) -> Value {
        let Value::Object(obj) = node else {
            // `true` is the empty schema; other values are left as they are.
            return if node == &Value::Bool(true) {
                Value::Object(Map::new())
            } else {
                node.clone()
            };
        };
        if depth > MAX_DEPTH {
            return Value::Object(Map::new());
        }
        // The referenced schema first; the keywords beside `$ref` refine it.
        let mut out = match obj.get("$ref").and_then(Value::as_str) {
            Some(reference) => match self.follow(reference, depth) {
                Value::Object(target) => target,
                _ => Map::new(),
            },
            None => Map::new(),
        };
        for (key, value) in obj {
            let key = key.as_str();
            if key == "$ref" || DROPPED.contains(&key) {
                continue;
            }
            let walked = match value {
                Value::Array(list) if ONE.contains(&key) || LIST.contains(&key) => {
                    Value::Array(list.iter().map(|v| self.walk(v, depth + 1)).collect())
                }
                Value::Object(map) if MAP.contains(&key) => Value::Object(
                    map.iter()
                        .map(|(name, v)| (name.clone(), self.walk(v, depth + 1)))
                        .collect(),
                ),
                // `additionalProperties: false` stays a boolean.
                Value::Bool(_) if key == "additionalProperties" => value.clone(),
                v if ONE.contains(&key) => self.walk(v, depth + 1),
                v => v.clone(),
            };
            out.insert(key.to_owned(), walked);
        }
        Value::Object(out)
    }

    fn follow(&mut self, reference: &str, depth: usize) -> Value {
        if self.following.iter().any(|r| r == reference) {
            return Value::Object(Map::new());
        }
        let target = match reference.strip_prefix('#') {
            Some("") => Some(self.root),
            Some(pointer) => self.root.pointer(pointer),
            None => None,
        };
        let Some(target) = target else {
            return Value::Object(Map::new());
        };
        self.following.push(reference.to_owned());
        let out = self.walk(target, depth + 1);
        self.following.pop();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_are_inlined_and_recursion_is_cut() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "to": {"$ref": "#/$defs/Account", "description": "Where to."},
                "tree": {"$ref": "#/$defs/Node"},
                "lost": {"$ref": "https://example.com/x.json"},
                "tags": {"type": "array", "items": true}
            },
            "additionalProperties": false,
            "$defs": {
                "Account": {"type": "string", "enum": ["checking", "savings"]},
                "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
            }
        });
        assert_eq!(
            inline_refs(&schema),
            json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string", "enum": ["checking", "savings"], "description": "Where to."},
                    "tree": {"type": "object", "properties": {"next": {}}},
                    "lost": {},
                    "tags": {"type": "array", "items": {}}
                },
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn tool_inputs_are_object_schemas() {
        assert_eq!(tool_input(None), json!({"type": "object", "properties": {}}));
        assert_eq!(
            tool_input(Some(&json!({"required": []}))),
            json!({"required": [], "type": "object", "properties": {}})
        );
        assert_eq!(tool_input(Some(&json!({"type": "string"}))), json!({"type": "string"}));
    }
}
