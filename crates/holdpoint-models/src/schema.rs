//! JSON Schema shaping per provider.
//!
//! Tool schemas come from `schemars` (draft 2020-12: `$schema`, `$defs`,
//! `$ref`, `["string", "null"]` types, `uint32` formats) or from users.
//! Providers accept less:
//!
//! - every dialect: `$ref`s are inlined from `$defs`/`definitions` (a
//!   recursive reference becomes an unconstrained schema), and the
//!   annotations `$schema`, `$id`, `$comment`, `$anchor` are dropped;
//! - Gemini (an OpenAPI 3.0 subset) also: only the keywords it documents
//!   are kept (`additionalProperties`, `const`, `oneOf`, `not`, … go);
//!   `["T", "null"]` and `anyOf [.., {"type": "null"}]` become `nullable`;
//!   `oneOf` becomes `anyOf`, `allOf` is merged, a string `const` becomes a
//!   one-value `enum`, non-string enums and formats it rejects (`uint32`,
//!   `email`, …) are dropped, and `required` names only listed properties.

use serde_json::{Map, Value};

/// Which provider's rules to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Gemini's OpenAPI-style `Schema`.
    #[cfg(feature = "gemini")]
    Gemini,
    /// OpenAI-compatible `parameters` and Anthropic `input_schema`.
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    JsonSchema,
}

const DROPPED: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "definitions",
    "$comment",
    "$anchor",
    "$dynamicAnchor",
];

#[cfg(feature = "gemini")]
const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// Keys whose value is one schema.
const SCHEMA_KEYS: &[&str] = &["items", "additionalProperties", "not", "if", "then", "else", "contains"];
/// Keys whose value is a list of schemas.
const SCHEMA_LIST_KEYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keys whose value maps names to schemas.
const SCHEMA_MAP_KEYS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];

const MAX_DEPTH: usize = 64;

/// Shapes `schema` for `dialect`.
pub(crate) fn shape(schema: &Value, dialect: Dialect) -> Value {
    let mut shaper = Shaper {
        root: schema,
        dialect,
        stack: Vec::new(),
    };
    shaper.walk(schema, 0)
}

/// An object schema for a tool input: the shaped schema, or an empty
/// object schema when the tool declares none.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn tool_input(schema: Option<&Value>, dialect: Dialect) -> Value {
    let mut shaped = match schema {
        Some(s) => shape(s, dialect),
        None => Value::Object(Map::new()),
    };
    if let Value::Object(obj) = &mut shaped {
        if !obj.contains_key("type") {
            obj.insert("type".into(), Value::String("object".into()));
        }
        if obj.get("type").and_then(Value::as_str) == Some("object") && !obj.contains_key("properties") {
            obj.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    shaped
}

struct Shaper<'a> {
    root: &'a Value,
    dialect: Dialect,
    stack: Vec<String>,
}

impl Shaper<'_> {
    fn walk(&mut self, node: &Value, depth: usize) -> Value {
        let Value::Object(obj) = node else {
            // `true` accepts anything; other non-objects are left alone.
            return if node == &Value::Bool(true) {
                Value::Object(Map::new())
            } else {
                node.clone()
            };
        };
        if depth > MAX_DEPTH {
            return self.unconstrained();
        }
        let mut out = Map::new();
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference, depth) {
                Value::Object(resolved) => out = resolved,
                other => return other,
            }
        }
        for (key, value) in obj {
            if key == "$ref" || DROPPED.contains(&key.as_str()) {
                continue;
            }
            let shaped = if SCHEMA_KEYS.contains(&key.as_str()) {
                match value {
                    Value::Array(list) => Value::Array(list.iter().map(|v| self.walk(v, depth + 1)).collect()),
                    Value::Bool(_) if key == "additionalProperties" => value.clone(),
                    v => self.walk(v, depth + 1),
                }
            } else if SCHEMA_LIST_KEYS.contains(&key.as_str()) {
                match value {
                    Value::Array(list) => Value::Array(list.iter().map(|v| self.walk(v, depth + 1)).collect()),
                    v => v.clone(),
                }
            } else if SCHEMA_MAP_KEYS.contains(&key.as_str()) {
                match value {
                    Value::Object(map) => {
                        Value::Object(map.iter().map(|(k, v)| (k.clone(), self.walk(v, depth + 1))).collect())
                    }
                    v => v.clone(),
                }
            } else {
                value.clone()
            };
            out.insert(key.clone(), shaped);
        }
        #[cfg(feature = "gemini")]
        if self.dialect == Dialect::Gemini {
            gemini_fix(&mut out);
        }
        Value::Object(out)
    }

    fn resolve(&mut self, reference: &str, depth: usize) -> Value {
        if self.stack.iter().any(|r| r == reference) {
            return self.unconstrained();
        }
        let target = reference.strip_prefix('#').and_then(|pointer| {
            if pointer.is_empty() {
                Some(self.root)
            } else {
                self.root.pointer(pointer)
            }
        });
        let Some(target) = target else {
            // A reference we cannot follow (remote, or dangling).
            return self.unconstrained();
        };
        self.stack.push(reference.to_owned());
        let shaped = self.walk(target, depth + 1);
        self.stack.pop();
        shaped
    }

    fn unconstrained(&self) -> Value {
        match self.dialect {
            #[cfg(feature = "gemini")]
            Dialect::Gemini => serde_json::json!({"type": "object"}),
            #[cfg(any(feature = "openai", feature = "anthropic"))]
            Dialect::JsonSchema => Value::Object(Map::new()),
        }
    }
}

/// One schema object rewritten into the subset Gemini accepts: members
/// merged, nullability as `nullable`, string-only enums, the formats it
/// knows, and only its keys.
#[cfg(feature = "gemini")]
fn gemini_fix(obj: &mut Map<String, Value>) {
    gemini_merge(obj);
    gemini_types(obj);
    gemini_enums(obj);
    gemini_format(obj);
    gemini_shape(obj);
    obj.retain(|k, _| GEMINI_KEYS.contains(&k.as_str()));
}

/// `allOf` members merged into the object; `oneOf` read as `anyOf`.
#[cfg(feature = "gemini")]
fn gemini_merge(obj: &mut Map<String, Value>) {
    if let Some(Value::Array(members)) = obj.remove("allOf") {
        for member in members {
            if let Value::Object(m) = member {
                for (k, v) in m {
                    obj.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(one_of) = obj.remove("oneOf") {
        obj.entry("anyOf").or_insert(one_of);
    }
}

/// A `type` array or an `anyOf` with a null member becomes `nullable`
/// with the other type(s).
#[cfg(feature = "gemini")]
fn gemini_types(obj: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = obj.get("type").cloned() {
        let non_null: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
        if non_null.len() < types.len() {
            obj.insert("nullable".into(), Value::Bool(true));
        }
        match non_null.as_slice() {
            [single] => {
                obj.insert("type".into(), single.clone());
            }
            [] => {
                obj.remove("type");
            }
            many => {
                obj.remove("type");
                let members = many.iter().map(|t| serde_json::json!({"type": t})).collect();
                obj.insert("anyOf".into(), Value::Array(members));
            }
        }
    }
    if let Some(Value::Array(members)) = obj.get("anyOf").cloned() {
        let is_null = |m: &Value| m.get("type").and_then(Value::as_str) == Some("null");
        let rest: Vec<Value> = members.iter().filter(|m| !is_null(m)).cloned().collect();
        if rest.len() < members.len() {
            obj.insert("nullable".into(), Value::Bool(true));
            obj.remove("anyOf");
            match rest.as_slice() {
                [Value::Object(single)] => {
                    for (k, v) in single {
                        obj.entry(k.clone()).or_insert(v.clone());
                    }
                }
                [] => {}
                _ => {
                    obj.insert("anyOf".into(), Value::Array(rest));
                }
            }
        }
    }
}

/// A string `const` becomes a one-value `enum`; enums of other values go.
#[cfg(feature = "gemini")]
fn gemini_enums(obj: &mut Map<String, Value>) {
    if let Some(c) = obj.remove("const")
        && c.is_string()
    {
        obj.insert("enum".into(), Value::Array(vec![c]));
        obj.entry("type").or_insert(Value::String("string".into()));
    }
    if let Some(Value::Array(values)) = obj.get("enum")
        && !values.iter().all(Value::is_string)
    {
        obj.remove("enum");
    }
}

/// Only the formats Gemini knows for the type are kept.
#[cfg(feature = "gemini")]
fn gemini_format(obj: &mut Map<String, Value>) {
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    if let Some(format) = obj.get("format").and_then(Value::as_str) {
        let allowed = match kind.as_str() {
            "string" => ["enum", "date-time"].contains(&format),
            "integer" => ["int32", "int64"].contains(&format),
            "number" => ["float", "double"].contains(&format),
            _ => false,
        };
        if !allowed {
            obj.remove("format");
        }
    }
}

/// `required` names only declared properties; tuple `items` keep the first.
#[cfg(feature = "gemini")]
fn gemini_shape(obj: &mut Map<String, Value>) {
    if let Some(Value::Array(required)) = obj.get("required") {
        let props = obj.get("properties").and_then(Value::as_object);
        let kept: Vec<Value> = required
            .iter()
            .filter(|r| {
                r.as_str()
                    .is_some_and(|name| props.is_some_and(|p| p.contains_key(name)))
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            obj.remove("required");
        } else {
            obj.insert("required".into(), Value::Array(kept));
        }
    }
    if let Some(Value::Array(items)) = obj.get("items").cloned() {
        // Tuple form is not supported: keep the first item's schema.
        match items.into_iter().next() {
            Some(first) => obj.insert("items".into(), first),
            None => obj.remove("items"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemars_like() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "TransferInput",
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "format": "uint32", "minimum": 0},
                "note": {"type": ["string", "null"]},
                "to": {"$ref": "#/$defs/Account", "description": "Where to"},
                "kind": {"oneOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]},
                "tree": {"$ref": "#/$defs/Node"},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Account"}, {"type": "null"}]}
            },
            "required": ["amount", "to", "ghost"],
            "additionalProperties": false,
            "$defs": {
                "Account": {"type": "object", "properties": {"id": {"type": "string", "format": "email"}}, "required": ["id"]},
                "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}
            }
        })
    }

    #[test]
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    fn json_schema_dialect_inlines_refs_and_drops_meta() {
        let s = shape(&schemars_like(), Dialect::JsonSchema);
        assert!(s.get("$schema").is_none() && s.get("$defs").is_none());
        assert_eq!(s["properties"]["to"]["properties"]["id"]["format"], "email");
        assert_eq!(s["properties"]["to"]["description"], "Where to");
        assert_eq!(s["additionalProperties"], false);
        // Recursion is cut after one level.
        assert_eq!(s["properties"]["tree"]["properties"]["child"], json!({}));
        assert!(!s.to_string().contains("$ref"));
    }

    #[test]
    #[cfg(feature = "gemini")]
    fn gemini_dialect_keeps_only_openapi_subset() {
        let s = shape(&schemars_like(), Dialect::Gemini);
        let text = s.to_string();
        for gone in [
            "$ref",
            "$defs",
            "$schema",
            "additionalProperties",
            "uint32",
            "email",
            "oneOf",
            "const",
            "ghost",
        ] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
        assert_eq!(s["properties"]["note"], json!({"type": "string", "nullable": true}));
        assert_eq!(
            s["properties"]["kind"]["anyOf"][0],
            json!({"type": "string", "enum": ["a"]})
        );
        assert_eq!(s["properties"]["maybe"]["nullable"], true);
        assert_eq!(s["properties"]["maybe"]["type"], "object");
        assert_eq!(s["required"], json!(["amount", "to"]));
        assert_eq!(
            s["properties"]["tree"]["properties"]["child"],
            json!({"type": "object"})
        );
    }

    #[test]
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    fn tool_input_defaults_to_empty_object() {
        assert_eq!(
            tool_input(None, Dialect::JsonSchema),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            tool_input(
                Some(&json!({"properties": {"a": {"type": "string"}}})),
                Dialect::JsonSchema
            ),
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
    }
}
