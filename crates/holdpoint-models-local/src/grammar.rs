//! GBNF grammars (llama.cpp's grammar format) generated from JSON Schemas,
//! for grammar-constrained decoding.
//!
//! The JSON the grammars accept is compact with fixed separators (`": "`
//! and `", "`, no other whitespace), so a weak model cannot wander off
//! into endless spaces or newlines. Numbers are bounded in length.
//!
//! Supported keywords: `type` (a name or a list of names), `properties`
//! and `required` (properties in declared order, required ones always
//! present, the others optional; no extra properties), `items`,
//! `minItems`/`maxItems`, `minLength`/`maxLength`, `enum`, `const`,
//! `anyOf`/`oneOf` (alternatives) and `allOf` (merged). `$ref`s are
//! inlined first (a recursive one accepts any value there). Anything
//! else (patterns, formats, minimum/maximum) is not enforced; an empty or
//! unknown schema accepts any JSON value.

use std::collections::HashSet;

use holdpoint::model::ToolDefinition;
use serde_json::{Map, Value};

use crate::schema::{inline_refs, tool_input};

/// How deep a schema may nest before the rest accepts any value.
const MAX_DEPTH: usize = 32;
/// Repetition counts above this are left unbounded (the grammar would
/// grow with the count).
const MAX_COUNT: u64 = 64;

/// The key of a tool call's name in the output JSON.
pub const TOOL_KEY: &str = "tool";
/// The key of a tool call's arguments in the output JSON.
pub const ARGUMENTS_KEY: &str = "arguments";
/// The key of a text answer in the output JSON.
pub const ANSWER_KEY: &str = "answer";

/// Shared rules, defined once when first used.
const STRING: &str = "string";
const VALUE: &str = "value";

/// Rules of a grammar under construction.
#[derive(Debug, Default)]
struct Grammar {
    rules: Vec<(String, String)>,
    names: HashSet<String>,
}

impl Grammar {
    /// The GBNF text, `root` first.
    fn render(&self) -> String {
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
    fn add(&mut self, hint: &str, body: String) -> String {
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

    fn string(&mut self) -> String {
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
    fn value(&mut self) -> String {
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

    fn walk(&mut self, schema: &Value, hint: &str, depth: usize) -> String {
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

/// What the model may do when the request has tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMode {
    /// Call a tool or answer with text (`auto`).
    CallOrAnswer,
    /// Call a tool (`required`).
    MustCall,
    /// Answer with text (tools offered, but a call is not wanted now).
    MustAnswer,
}

/// The grammar of a reply when tools are offered: one JSON object, either
/// `{"tool": "NAME", "arguments": {…}}` with arguments matching that
/// tool's input schema, or (unless `mode` is [`ToolMode::MustCall`])
/// `{"answer": "…"}` (only that for [`ToolMode::MustAnswer`]).
pub fn tool_grammar(tools: &[ToolDefinition], mode: ToolMode) -> String {
    let mut g = Grammar::default();
    g.names.insert("root".to_owned());
    let mut alts = Vec::new();
    let callable = if mode == ToolMode::MustAnswer { &[][..] } else { tools };
    for tool in callable {
        let schema = tool_input(tool.input_schema.as_ref());
        let args = g.walk(&schema, &format!("{}-args", tool.name), 0);
        let head = format!(
            "{{{}: {}, {}: ",
            compact_key(TOOL_KEY),
            compact_key(&tool.name),
            compact_key(ARGUMENTS_KEY)
        );
        alts.push(g.add(
            &format!("call-{}", tool.name),
            format!("{} {args} \"}}\"", literal(&head)),
        ));
    }
    if mode != ToolMode::MustCall || alts.is_empty() {
        let string = g.string();
        let head = format!("{{{}: ", compact_key(ANSWER_KEY));
        alts.push(g.add("answer", format!("{} {string} \"}}\"", literal(&head))));
    }
    g.rules.push(("root".to_owned(), alts.join(" | ")));
    g.render()
}

/// The grammar of a JSON reply matching `schema` (any JSON value when
/// there is none).
pub fn json_grammar(schema: Option<&Value>) -> String {
    let mut g = Grammar::default();
    g.names.insert("root".to_owned());
    let shaped = schema.map(inline_refs);
    let expr = match &shaped {
        Some(s) => g.walk(s, "output", 0),
        None => g.value(),
    };
    g.rules.push(("root".to_owned(), expr));
    g.render()
}

/// `value` as compact JSON.
fn compact(value: &Value) -> String {
    value.to_string()
}

/// A JSON string literal for a key or name.
fn compact_key(key: &str) -> String {
    Value::String(key.to_owned()).to_string()
}

/// A GBNF string literal matching exactly `text`.
fn literal(text: &str) -> String {
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
fn rule_name(hint: &str) -> String {
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

/// A non-negative integer keyword, when present and small enough to unroll.
fn count(obj: &Map<String, Value>, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64).map(|n| n.min(MAX_COUNT))
}

/// A repetition suffix: `*`, `{m,}`, `{m,n}`.
fn repeat(min: u64, max: Option<u64>) -> String {
    match (min, max) {
        (0, None) => "*".to_owned(),
        (1, None) => "+".to_owned(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) => format!("{{{m},{}}}", n.max(m)),
    }
}

/// An `anyOf`/`oneOf` option with the keywords of the schema around it
/// (other than the list itself), as JSON Schema reads them together.
fn merge_siblings(parent: &Map<String, Value>, option: &Value, list_key: &str) -> Value {
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
fn merge_into(base: &mut Map<String, Value>, extra: &Map<String, Value>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small GBNF matcher for the subset the generator emits, so the
    /// grammars can be checked without llama.cpp.
    mod matcher {
        use std::collections::HashMap;

        #[derive(Debug, Clone)]
        pub enum Expr {
            Lit(String),
            Class { negated: bool, ranges: Vec<(char, char)> },
            Rule(String),
            Seq(Vec<Expr>),
            Alt(Vec<Expr>),
            Rep(Box<Expr>, usize, Option<usize>),
        }

        pub struct Gbnf {
            rules: HashMap<String, Expr>,
        }

        impl Gbnf {
            pub fn parse(text: &str) -> Gbnf {
                let mut rules = HashMap::new();
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    let (name, body) = line.split_once(" ::= ").unwrap();
                    let chars: Vec<char> = body.chars().collect();
                    let mut pos = 0;
                    let expr = alt(&chars, &mut pos);
                    skip(&chars, &mut pos);
                    assert_eq!(pos, chars.len(), "trailing input in rule {name}: {body}");
                    assert!(
                        rules.insert(name.trim().to_owned(), expr).is_none(),
                        "duplicate rule {name}"
                    );
                }
                let g = Gbnf { rules };
                for e in g.rules.values() {
                    g.check_refs(e);
                }
                g
            }

            fn check_refs(&self, e: &Expr) {
                match e {
                    Expr::Rule(r) => assert!(self.rules.contains_key(r), "undefined rule {r}"),
                    Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|e| self.check_refs(e)),
                    Expr::Rep(e, _, _) => self.check_refs(e),
                    _ => {}
                }
            }

            pub fn matches(&self, input: &str) -> bool {
                let chars: Vec<char> = input.chars().collect();
                self.ends(&Expr::Rule("root".into()), &chars, 0).contains(&chars.len())
            }

            /// Every position where `e` can stop matching from `at`.
            fn ends(&self, e: &Expr, s: &[char], at: usize) -> Vec<usize> {
                let mut out = match e {
                    Expr::Lit(l) => {
                        let l: Vec<char> = l.chars().collect();
                        if s[at..].starts_with(&l) {
                            vec![at + l.len()]
                        } else {
                            vec![]
                        }
                    }
                    Expr::Class { negated, ranges } => match s.get(at) {
                        Some(c) if ranges.iter().any(|(a, b)| a <= c && c <= b) != *negated => vec![at + 1],
                        _ => vec![],
                    },
                    Expr::Rule(r) => self.ends(&self.rules[r], s, at),
                    Expr::Seq(items) => {
                        let mut cur = vec![at];
                        for item in items {
                            cur = cur.iter().flat_map(|&p| self.ends(item, s, p)).collect();
                            cur.sort_unstable();
                            cur.dedup();
                        }
                        cur
                    }
                    Expr::Alt(alts) => alts.iter().flat_map(|a| self.ends(a, s, at)).collect(),
                    Expr::Rep(inner, min, max) => {
                        let mut out: Vec<usize> = Vec::new();
                        let mut cur = vec![at];
                        let mut n = 0;
                        loop {
                            if n >= *min {
                                cur.retain(|p| !out.contains(p));
                                out.extend(cur.iter().copied());
                            }
                            if cur.is_empty() || max.is_some_and(|m| n >= m) {
                                break;
                            }
                            let mut next: Vec<usize> = cur.iter().flat_map(|&p| self.ends(inner, s, p)).collect();
                            next.sort_unstable();
                            next.dedup();
                            cur = next;
                            n += 1;
                        }
                        out
                    }
                };
                out.sort_unstable();
                out.dedup();
                out
            }
        }

        fn skip(c: &[char], p: &mut usize) {
            while *p < c.len() && c[*p] == ' ' {
                *p += 1;
            }
        }

        fn alt(c: &[char], p: &mut usize) -> Expr {
            let mut alts = vec![seq(c, p)];
            skip(c, p);
            while *p < c.len() && c[*p] == '|' {
                *p += 1;
                alts.push(seq(c, p));
                skip(c, p);
            }
            if alts.len() == 1 {
                alts.remove(0)
            } else {
                Expr::Alt(alts)
            }
        }

        fn seq(c: &[char], p: &mut usize) -> Expr {
            let mut items = Vec::new();
            loop {
                skip(c, p);
                if *p >= c.len() || c[*p] == '|' || c[*p] == ')' {
                    break;
                }
                let atom = atom(c, p);
                items.push(postfix(c, p, atom));
            }
            Expr::Seq(items)
        }

        fn postfix(c: &[char], p: &mut usize, atom: Expr) -> Expr {
            match c.get(*p) {
                Some('*') => {
                    *p += 1;
                    Expr::Rep(Box::new(atom), 0, None)
                }
                Some('+') => {
                    *p += 1;
                    Expr::Rep(Box::new(atom), 1, None)
                }
                Some('?') => {
                    *p += 1;
                    Expr::Rep(Box::new(atom), 0, Some(1))
                }
                Some('{') => {
                    let end = c[*p..].iter().position(|&x| x == '}').unwrap() + *p;
                    let inner: String = c[*p + 1..end].iter().collect();
                    *p = end + 1;
                    let (min, max) = match inner.split_once(',') {
                        Some((a, "")) => (a.parse().unwrap(), None),
                        Some((a, b)) => (a.parse().unwrap(), Some(b.parse().unwrap())),
                        None => (inner.parse().unwrap(), Some(inner.parse().unwrap())),
                    };
                    Expr::Rep(Box::new(atom), min, max)
                }
                _ => atom,
            }
        }

        fn escaped(c: &[char], p: &mut usize) -> char {
            let e = c[*p];
            *p += 1;
            match e {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'x' => {
                    let hex: String = c[*p..*p + 2].iter().collect();
                    *p += 2;
                    char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap()
                }
                other => other,
            }
        }

        fn atom(c: &[char], p: &mut usize) -> Expr {
            match c[*p] {
                '"' => {
                    *p += 1;
                    let mut lit = String::new();
                    while c[*p] != '"' {
                        if c[*p] == '\\' {
                            *p += 1;
                            lit.push(escaped(c, p));
                        } else {
                            lit.push(c[*p]);
                            *p += 1;
                        }
                    }
                    *p += 1;
                    Expr::Lit(lit)
                }
                '[' => {
                    *p += 1;
                    let negated = c[*p] == '^';
                    if negated {
                        *p += 1;
                    }
                    let mut ranges = Vec::new();
                    while c[*p] != ']' {
                        let read = |p: &mut usize| {
                            if c[*p] == '\\' {
                                *p += 1;
                                escaped(c, p)
                            } else {
                                *p += 1;
                                c[*p - 1]
                            }
                        };
                        let a = read(p);
                        if c[*p] == '-' && c[*p + 1] != ']' {
                            *p += 1;
                            let b = read(p);
                            ranges.push((a, b));
                        } else {
                            ranges.push((a, a));
                        }
                    }
                    *p += 1;
                    Expr::Class { negated, ranges }
                }
                '(' => {
                    *p += 1;
                    let e = alt(c, p);
                    skip(c, p);
                    assert_eq!(c[*p], ')');
                    *p += 1;
                    e
                }
                _ => {
                    let start = *p;
                    while *p < c.len() && (c[*p].is_ascii_alphanumeric() || c[*p] == '-') {
                        *p += 1;
                    }
                    assert!(*p > start, "unexpected {:?} at {}", c[*p], *p);
                    Expr::Rule(c[start..*p].iter().collect())
                }
            }
        }
    }

    use matcher::Gbnf;

    fn banking_tools() -> Vec<ToolDefinition> {
        let tool = |name: &str, schema: Value| ToolDefinition {
            name: name.into(),
            description: format!("{name} tool"),
            input_schema: Some(schema),
            output_schema: None,
            metadata: None,
        };
        vec![
            tool(
                "transferMoney",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "Transfer",
                    "type": "object",
                    "properties": {
                        "amount": {"description": "Amount in dollars.", "type": "number", "format": "double"},
                        "toAccount": {"description": "The destination account.", "type": "string"}
                    },
                    "required": ["amount", "toAccount"]
                }),
            ),
            tool(
                "getBalance",
                json!({"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}),
            ),
        ]
    }

    #[test]
    fn tool_grammar_accepts_calls_and_answers_only() {
        let text = tool_grammar(&banking_tools(), ToolMode::CallOrAnswer);
        let g = Gbnf::parse(&text);
        for ok in [
            r#"{"tool": "transferMoney", "arguments": {"amount": 500, "toAccount": "savings"}}"#,
            r#"{"tool": "transferMoney", "arguments": {"amount": 12.5e2, "toAccount": "my \"savings\" account"}}"#,
            r#"{"tool": "getBalance", "arguments": {"account": "checking"}}"#,
            r#"{"answer": "Hello!\nHow can I help?"}"#,
        ] {
            assert!(g.matches(ok), "should match: {ok}\n{text}");
        }
        for bad in [
            r#"{"tool": "transferMoney", "arguments": {"amount": "500", "toAccount": "savings"}}"#,
            r#"{"tool": "transferMoney", "arguments": {"toAccount": "savings", "amount": 500}}"#,
            r#"{"tool": "transferMoney", "arguments": {"amount": 500}}"#,
            r#"{"tool": "closeAccount", "arguments": {}}"#,
            r#"{"tool":"getBalance","arguments":{"account":"checking"}}"#,
            r#"{"answer": "unterminated}"#,
            r#"{"amount": 0123}"#,
            "Sure, let me do that.",
        ] {
            assert!(!g.matches(bad), "should not match: {bad}\n{text}");
        }
        let must = Gbnf::parse(&tool_grammar(&banking_tools(), ToolMode::MustCall));
        assert!(!must.matches(r#"{"answer": "no"}"#));
        assert!(must.matches(r#"{"tool": "getBalance", "arguments": {"account": "x"}}"#));
        let answer = Gbnf::parse(&tool_grammar(&banking_tools(), ToolMode::MustAnswer));
        assert!(answer.matches(r#"{"answer": "yes"}"#));
        assert!(!answer.matches(r#"{"tool": "getBalance", "arguments": {"account": "x"}}"#));
    }

    #[test]
    fn schema_keywords_map_to_rules() {
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": {"enum": ["a", "b c", 3]},
                "count": {"type": "integer"},
                "flag": {"type": ["boolean", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
                "nested": {"$ref": "#/$defs/Inner"},
                "either": {"anyOf": [{"type": "string", "maxLength": 3}, {"const": {"x": 1}}]},
                "free": {}
            },
            "required": ["kind", "count"],
            "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "string"}}}}
        });
        let g = Gbnf::parse(&json_grammar(Some(&schema)));
        for ok in [
            r#"{"kind": "a", "count": -3}"#,
            r#"{"kind": 3, "count": 0, "flag": null}"#,
            r#"{"kind": "b c", "count": 1, "tags": ["x", "y"], "nested": {"y": "z"}}"#,
            r#"{"kind": "a", "count": 1, "nested": {}, "either": "abc", "free": [1, {"k": true}]}"#,
            r#"{"kind": "a", "count": 1, "either": {"x":1}}"#,
            r#"{"kind": "a", "count": 1, "flag": true, "free": null}"#,
        ] {
            assert!(g.matches(ok), "should match: {ok}");
        }
        for bad in [
            r#"{"kind": "c", "count": 1}"#,
            r#"{"kind": "a", "count": 1.5}"#,
            r#"{"kind": "a", "count": 1, "tags": []}"#,
            r#"{"kind": "a", "count": 1, "tags": ["a", "b", "c"]}"#,
            r#"{"kind": "a", "count": 1, "either": "abcd"}"#,
            r#"{"kind": "a", "count": 1, "extra": 1}"#,
            r#"{"kind": "a", "count": 1, "nested": {"y": "z", "x": 1}}"#,
        ] {
            assert!(!g.matches(bad), "should not match: {bad}");
        }
    }

    #[test]
    fn empty_and_odd_schemas_are_permissive() {
        let any = Gbnf::parse(&json_grammar(None));
        assert!(any.matches(r#"[1, "two", {"three": [true, null]}]"#));
        assert!(!any.matches("[1,2]"));
        let tools = vec![ToolDefinition {
            name: "weird name/é".into(),
            description: String::new(),
            input_schema: None,
            output_schema: None,
            metadata: None,
        }];
        let text = tool_grammar(&tools, ToolMode::MustCall);
        let g = Gbnf::parse(&text);
        assert!(g.matches(r#"{"tool": "weird name/é", "arguments": {}}"#), "{text}");
        assert!(
            g.matches(r#"{"tool": "weird name/é", "arguments": {"a": 1}}"#),
            "{text}"
        );
        let closed = Gbnf::parse(&json_grammar(Some(
            &json!({"type": "object", "additionalProperties": false}),
        )));
        assert!(closed.matches("{}"));
        assert!(!closed.matches(r#"{"a": 1}"#));
        let optional = Gbnf::parse(&json_grammar(Some(&json!({
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}
        }))));
        for ok in ["{}", r#"{"a": 1}"#, r#"{"b": 2}"#, r#"{"a": 1, "b": 2}"#] {
            assert!(optional.matches(ok), "{ok}");
        }
        assert!(!optional.matches(r#"{"b": 2, "a": 1}"#));
    }

    #[test]
    fn literals_and_names_are_escaped() {
        assert_eq!(literal("a\"b\\c\n\u{1}"), r#""a\"b\\c\n\x01""#);
        assert_eq!(rule_name("call-transfer money!"), "call-transfer-money");
        assert_eq!(rule_name("root"), "r-root");
        assert_eq!(rule_name("__"), "r-");
    }
}
