//! The translation itself: a [`Grammar`] under construction and the rules
//! it emits for each schema keyword, recursively over the schema, sharing
//! the rule names and shared rules of the one grammar being built.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::merge::{merge_into, merge_siblings};
use super::text::{compact, compact_key, literal, repeat, rule_name};

/// How deep a schema may nest before the rest accepts any value.
const MAX_DEPTH: usize = 32;
/// Repetition counts above this are left unbounded (the grammar would
/// grow with the count).
const MAX_COUNT: u64 = 64;

/// Shared rules, defined once when first used.
const STRING: &str = "string";
const VALUE: &str = "value";

/// Rules of a grammar under construction.
#[derive(Debug, Default)]
pub(super) struct Grammar {
    pub(super) rules: Vec<(String, String)>,
    pub(super) names: HashSet<String>,
}

impl Grammar {
    /// The GBNF text, `root` first.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        let root = self.rules.iter().filter(|(n, _)| n == "root");
        let rest = self.rules.iter().filter(|(n, _)| n != "root");
        for (name, body) in root.chain(rest) {
            out.push_str(name);
            out.push_str(" ::= ");
            out.push_str(body);
            out.push('\n');
        }
        out
    }

    /// Adds a rule under a fresh name derived from `hint`; returns the name.
    pub(super) fn add(&mut self, hint: &str, body: String) -> String {
        let base = rule_name(hint);
        let mut name = base.clone();
        let mut n = 1;
        while self.names.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        self.names.insert(name.clone());
        self.rules.push((name.clone(), body));
        name
    }

    /// Adds the rule `name` with `body` unless it exists; returns the name.
    fn shared(&mut self, name: &str, body: &str) -> String {
        if self.names.insert(name.to_owned()) {
            self.rules.push((name.to_owned(), body.to_owned()));
        }
        name.to_owned()
    }

    pub(super) fn string(&mut self) -> String {
        self.shared(
            "char",
            r#"[^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] )"#,
        );
        self.shared(STRING, r#""\"" char* "\"""#)
    }

    fn integral(&mut self) -> String {
        self.shared("integral", r#""0" | [1-9] [0-9]{0,15}"#)
    }

    fn number(&mut self) -> String {
        self.integral();
        self.shared(
            "number",
            r#""-"? integral ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,3} )?"#,
        )
    }

    fn integer(&mut self) -> String {
        self.integral();
        self.shared("integer", r#""-"? integral"#)
    }

    fn boolean(&mut self) -> String {
        self.shared("boolean", r#""true" | "false""#)
    }

    fn null(&mut self) -> String {
        self.shared("null", r#""null""#)
    }

    /// Any JSON value.
    pub(super) fn value(&mut self) -> String {
        if !self.names.contains(VALUE) {
            self.names.insert(VALUE.to_owned());
            self.rules.push((
                VALUE.to_owned(),
                "any-object | any-array | string | number | boolean | null".to_owned(),
            ));
            self.string();
            self.number();
            self.boolean();
            self.null();
            self.shared(
                "any-object",
                r#""{" ( string ": " value ( ", " string ": " value )* )? "}""#,
            );
            self.shared("any-array", r#""[" ( value ( ", " value )* )? "]""#);
        }
        VALUE.to_owned()
    }

    pub(super) fn walk(&mut self, schema: &Value, hint: &str, depth: usize) -> String {
        let Value::Object(obj) = schema else {
            // `true` (or anything odd) accepts any value; `false` is left
            // permissive too, as a tool schema that rejects everything is
            // a mistake rather than an instruction.
            return self.value();
        };
        if depth > MAX_DEPTH {
            return self.value();
        }
        if let Some(value) = obj.get("const") {
            return literal(&compact(value));
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            let alts: Vec<String> = values.iter().map(|v| literal(&compact(v))).collect();
            if !alts.is_empty() {
                return self.add(hint, alts.join(" | "));
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key) {
                let mut alts: Vec<String> = Vec::new();
                for (i, option) in options.iter().enumerate() {
                    let merged = merge_siblings(obj, option, key);
                    alts.push(self.walk(&merged, &format!("{hint}-{i}"), depth + 1));
                }
                if !alts.is_empty() {
                    return self.add(hint, alts.join(" | "));
                }
            }
        }
        if let Some(Value::Array(parts)) = obj.get("allOf") {
            let mut merged = obj.clone();
            merged.remove("allOf");
            for part in parts {
                if let Value::Object(p) = part {
                    merge_into(&mut merged, p);
                }
            }
            return self.walk(&Value::Object(merged), hint, depth + 1);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, obj, hint, depth),
            Some(Value::Array(types)) => {
                let alts: Vec<String> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, obj, &format!("{hint}-{t}"), depth))
                    .collect();
                match alts.len() {
                    0 => self.value(),
                    1 => alts.into_iter().next().unwrap_or_default(),
                    _ => self.add(hint, alts.join(" | ")),
                }
            }
            _ if obj.contains_key("properties") => self.typed("object", obj, hint, depth),
            _ if obj.contains_key("items") => self.typed("array", obj, hint, depth),
            _ => self.value(),
        }
    }

    fn typed(&mut self, t: &str, obj: &Map<String, Value>, hint: &str, depth: usize) -> String {
        match t {
            "string" => {
                let min = count(obj, "minLength");
                let max = count(obj, "maxLength");
                if min.is_none() && max.is_none() {
                    self.string()
                } else {
                    self.string();
                    let body = format!(r#""\"" char{} "\"""#, repeat(min.unwrap_or(0), max));
                    self.add(hint, body)
                }
            }
            "number" => self.number(),
            "integer" => self.integer(),
            "boolean" => self.boolean(),
            "null" => self.null(),
            "array" => {
                let item = match obj.get("items") {
                    Some(items) => self.walk(items, &format!("{hint}-item"), depth + 1),
                    None => self.value(),
                };
                let min = count(obj, "minItems").unwrap_or(0);
                let max = count(obj, "maxItems");
                let body = match (min, max) {
                    (_, Some(0)) => r#""[]""#.to_owned(),
                    (0, max) => format!(
                        r#""[" ( {item} ( ", " {item} ){} )? "]""#,
                        repeat(0, max.map(|m| m - 1))
                    ),
                    (min, max) => format!(
                        r#""[" {item} ( ", " {item} ){} "]""#,
                        repeat(min - 1, max.map(|m| m.max(min) - 1))
                    ),
                };
                self.add(hint, body)
            }
            "object" => self.object(obj, hint, depth),
            _ => self.value(),
        }
    }

    fn object(&mut self, obj: &Map<String, Value>, hint: &str, depth: usize) -> String {
        let properties = match obj.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        if properties.is_empty() {
            return if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
                literal("{}")
            } else {
                self.value();
                "any-object".to_owned()
            };
        }
        let required: HashSet<&str> = match obj.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => HashSet::new(),
        };
        // Each property as `"key": value`, required ones first.
        let mut members: Vec<(bool, String)> = Vec::new();
        for pass_required in [true, false] {
            for (key, schema) in &properties {
                if required.contains(key.as_str()) != pass_required {
                    continue;
                }
                let value = self.walk(schema, &format!("{hint}-{key}"), depth + 1);
                members.push((
                    pass_required,
                    format!("{} {value}", literal(&format!("{}: ", compact_key(key)))),
                ));
            }
        }
        let n_required = members.iter().filter(|(r, _)| *r).count();
        let body = if n_required > 0 {
            let mut body = String::from(r#""{" "#);
            for (i, (_, member)) in members.iter().enumerate() {
                if i == 0 {
                    body.push_str(member);
                } else if i < n_required {
                    body.push_str(&format!(r#" ", " {member}"#));
                } else {
                    body.push_str(&format!(r#" ( ", " {member} )?"#));
                }
            }
            body.push_str(r#" "}""#);
            body
        } else {
            // All optional: one of them comes first, any later ones may follow.
            let optional: Vec<&String> = members.iter().map(|(_, m)| m).collect();
            let mut alts = Vec::new();
            for (i, first) in optional.iter().enumerate() {
                let mut alt = (*first).clone();
                for later in &optional[i + 1..] {
                    alt.push_str(&format!(r#" ( ", " {later} )?"#));
                }
                alts.push(alt);
            }
            format!(r#""{{" ( {} )? "}}""#, alts.join(" | "))
        };
        self.add(hint, body)
    }
}

/// A non-negative integer keyword, when present and small enough to unroll.
fn count(obj: &Map<String, Value>, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64).map(|n| n.min(MAX_COUNT))
}
