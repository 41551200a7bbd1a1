use super::text::rule_name;
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
