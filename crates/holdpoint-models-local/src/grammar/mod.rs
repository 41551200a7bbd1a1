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
//!
//! The entry points are here; the translation is in `rules.rs`, with GBNF
//! text in `text.rs` and the merging of combined schemas in `merge.rs`.

mod merge;
mod rules;
mod text;

use holdpoint::model::ToolDefinition;
use serde_json::Value;

use crate::schema::{inline_refs, tool_input};
use rules::Grammar;
use text::{compact_key, literal};

/// The key of a tool call's name in the output JSON.
pub const TOOL_KEY: &str = "tool";
/// The key of a tool call's arguments in the output JSON.
pub const ARGUMENTS_KEY: &str = "arguments";
/// The key of a text answer in the output JSON.
pub const ANSWER_KEY: &str = "answer";

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

#[cfg(test)]
mod tests;
