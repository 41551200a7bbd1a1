//! Redaction paths and masking: which parts of a held call's input a person
//! or another system never reads (docs/reference.md §22.1).
//!
//! Invariants: redaction is display-only. The stored snapshot keeps the
//! real input, the tool runs with it and a receipt hashes it; every surface
//! that shows a hold shows [`MASK`] in its place. A masked value that comes
//! back in an answer (a listing's part restarted, or an edit that kept a
//! masked field) is restored from the stored input before the answer is
//! checked ([`unmask_resume`]), so masking never changes what runs.

use serde_json::{Map, Value};

use crate::message::resume::Resume;
use crate::message::{Message, Part, metadata};

/// What a redacted value is replaced with.
pub const MASK: &str = "[redacted]";

/// The most segments one path may have.
const MAX_SEGMENTS: usize = 32;

/// One step of a [`RedactPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
    /// Any one key or index (`*`, `[*]`).
    Any,
    /// Any run of keys and indexes, including none (`**`).
    Deep,
}

/// A path into a call's input whose value is masked: dotted keys, `[n]`
/// indexes and wildcards — `card.number`, `items[*].pin`, `*.secret`
/// (`*` is one key or index), `**.password` (`**` is any depth).
///
/// ```
/// use holdpoint::review::RedactPath;
/// assert!(RedactPath::parse("payee.iban").is_ok());
/// assert!(RedactPath::parse("cards[*].cvv").is_ok());
/// assert!(RedactPath::parse("**.password").is_ok());
/// assert!(RedactPath::parse("a..b").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactPath {
    source: String,
    segments: Vec<Segment>,
}

/// A redaction path that cannot be read: the path and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("redaction path `{path}`: {why}")]
pub struct RedactPathError {
    /// The path as written.
    pub path: String,
    /// What is wrong with it.
    pub why: String,
}

impl From<RedactPathError> for crate::Error {
    fn from(e: RedactPathError) -> Self {
        crate::Error::InvalidArgument(e.to_string())
    }
}

impl RedactPath {
    /// Reads `path`.
    pub fn parse(path: &str) -> Result<Self, RedactPathError> {
        let err = |why: &str| RedactPathError {
            path: path.to_owned(),
            why: why.to_owned(),
        };
        let mut segments = Vec::new();
        let trimmed = path.trim().trim_start_matches("$.");
        if trimmed.is_empty() {
            return Err(err("is empty"));
        }
        for dotted in trimmed.split('.') {
            let (key, mut rest) = match dotted.find('[') {
                Some(i) => dotted.split_at(i),
                None => (dotted, ""),
            };
            match key {
                "" if rest.is_empty() => return Err(err("has an empty key")),
                "" => {}
                "*" => segments.push(Segment::Any),
                "**" => segments.push(Segment::Deep),
                k if k.contains(['*', ']']) => return Err(err("a wildcard must be a whole key")),
                k => segments.push(Segment::Key(k.to_owned())),
            }
            while !rest.is_empty() {
                let Some(close) = rest.find(']') else {
                    return Err(err("has an unclosed `[`"));
                };
                let inner = &rest[1..close];
                segments.push(match inner {
                    "*" => Segment::Any,
                    n => Segment::Index(n.parse().map_err(|_| err("an index must be a number or `*`"))?),
                });
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(err("text after `]` must be another index or a `.`"));
                }
            }
        }
        if segments.len() > MAX_SEGMENTS {
            return Err(err("has too many segments"));
        }
        Ok(RedactPath {
            source: path.trim().to_owned(),
            segments,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// A set of [`RedactPath`]s: what a tool and the rule that holds its call
/// declare (their union applies).
///
/// ```
/// use holdpoint::review::Redaction;
/// use serde_json::json;
///
/// let r = Redaction::parse(["card.number", "card.cvv"])?;
/// let mut input = json!({"amount": 40, "card": {"number": "4111111111111111", "cvv": "123"}});
/// assert_eq!(r.mask(&mut input), 2);
/// assert_eq!(input, json!({"amount": 40, "card": {"number": "[redacted]", "cvv": "[redacted]"}}));
/// # Ok::<(), holdpoint::review::RedactPathError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redaction {
    paths: Vec<RedactPath>,
}

impl Redaction {
    /// The redaction of `paths`.
    pub fn parse<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Result<Self, RedactPathError> {
        let mut out = Redaction::default();
        for p in paths {
            out.add(RedactPath::parse(p.as_ref())?);
        }
        Ok(out)
    }

    /// Adds `path` (once).
    pub fn add(&mut self, path: RedactPath) {
        if !self.paths.contains(&path) {
            self.paths.push(path);
        }
    }

    /// Adds every path of `other`.
    pub fn extend(&mut self, other: &Redaction) {
        for p in &other.paths {
            self.add(p.clone());
        }
    }

    /// Whether it masks nothing.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The paths as written.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(RedactPath::as_str)
    }

    /// The paths a paused part records under `redact`; paths that do not
    /// parse are dropped (they were checked when the hold was made).
    pub fn on(part: &Part) -> Redaction {
        let mut out = Redaction::default();
        for p in part
            .meta(metadata::REDACT)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if let Ok(path) = RedactPath::parse(p) {
                out.add(path);
            }
        }
        out
    }

    /// The paths as the `redact` metadata value.
    pub fn to_value(&self) -> Value {
        Value::Array(self.paths().map(|p| Value::String(p.to_owned())).collect())
    }

    /// Replaces every value `value` has at these paths with [`MASK`];
    /// returns how many it replaced.
    pub fn mask(&self, value: &mut Value) -> usize {
        self.paths.iter().map(|p| mask_at(value, &p.segments)).sum()
    }

    /// Puts back, wherever `edited` holds [`MASK`] at one of these paths,
    /// the value `original` has at the same place.
    pub fn restore(&self, edited: &mut Value, original: &Value) {
        for p in &self.paths {
            restore_at(edited, original, &p.segments);
        }
    }
}

fn mask_at(value: &mut Value, path: &[Segment]) -> usize {
    let Some((first, rest)) = path.split_first() else {
        if value == &Value::String(MASK.to_owned()) {
            return 0;
        }
        *value = Value::String(MASK.to_owned());
        return 1;
    };
    match (first, value) {
        (Segment::Key(k), Value::Object(map)) => map.get_mut(k).map_or(0, |v| mask_at(v, rest)),
        (Segment::Index(i), Value::Array(items)) => items.get_mut(*i).map_or(0, |v| mask_at(v, rest)),
        (Segment::Any, Value::Object(map)) => map.values_mut().map(|v| mask_at(v, rest)).sum(),
        (Segment::Any, Value::Array(items)) => items.iter_mut().map(|v| mask_at(v, rest)).sum(),
        (Segment::Deep, value) => {
            // `**` matches here (zero levels) or below.
            let here = mask_at(value, rest);
            here + match value {
                Value::Object(map) => map.values_mut().map(|v| mask_at(v, path)).sum(),
                Value::Array(items) => items.iter_mut().map(|v| mask_at(v, path)).sum(),
                _ => 0,
            }
        }
        _ => 0,
    }
}

fn restore_at(edited: &mut Value, original: &Value, path: &[Segment]) {
    let Some((first, rest)) = path.split_first() else {
        if edited.as_str() == Some(MASK) {
            *edited = original.clone();
        }
        return;
    };
    match (first, edited) {
        (Segment::Key(k), Value::Object(map)) => {
            if let (Some(e), Some(o)) = (map.get_mut(k), original.get(k)) {
                restore_at(e, o, rest);
            }
        }
        (Segment::Index(i), Value::Array(items)) => {
            if let (Some(e), Some(o)) = (items.get_mut(*i), original.get(*i)) {
                restore_at(e, o, rest);
            }
        }
        (Segment::Any, Value::Object(map)) => {
            for (k, e) in map.iter_mut() {
                if let Some(o) = original.get(k) {
                    restore_at(e, o, rest);
                }
            }
        }
        (Segment::Any, Value::Array(items)) => {
            for (i, e) in items.iter_mut().enumerate() {
                if let Some(o) = original.get(i) {
                    restore_at(e, o, rest);
                }
            }
        }
        (Segment::Deep, edited) => {
            restore_at(edited, original, rest);
            match edited {
                Value::Object(map) => {
                    for (k, e) in map.iter_mut() {
                        if let Some(o) = original.get(k) {
                            restore_at(e, o, path);
                        }
                    }
                }
                Value::Array(items) => {
                    for (i, e) in items.iter_mut().enumerate() {
                        if let Some(o) = original.get(i) {
                            restore_at(e, o, path);
                        }
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// Masks what `part` (a held or once-held tool request) records as
/// redacted: its input, the original input of an edit (`replacedInput`),
/// and — for a sub-agent call that surfaced its child's holds — the
/// child's parts inside its interrupt data, at every depth.
pub fn redact_part(part: &mut Part) {
    let redaction = Redaction::on(part);
    if !redaction.is_empty() {
        if let Some(req) = part.as_tool_request_mut()
            && let Some(input) = req.input.as_mut()
        {
            redaction.mask(input);
        }
        if let Some(meta) = part.metadata.as_mut()
            && let Some(original) = meta.get_mut(metadata::REPLACED_INPUT)
        {
            redaction.mask(original);
        }
    }
    for key in [metadata::INTERRUPT, metadata::RESOLVED_INTERRUPT] {
        if let Some(Value::Object(data)) = part.metadata.as_mut().and_then(|m| m.get_mut(key)) {
            redact_surfaced(data);
        }
    }
}

/// Masks the child parts a surfaced hold's interrupt data carries.
fn redact_surfaced(data: &mut Map<String, Value>) {
    let Some(Value::Array(inner)) = data
        .get_mut(metadata::SUBAGENT)
        .and_then(Value::as_object_mut)
        .and_then(|s| s.get_mut("interrupts"))
    else {
        return;
    };
    for value in inner.iter_mut() {
        if let Ok(mut part) = serde_json::from_value::<Part>(value.clone()) {
            redact_part(&mut part);
            if let Ok(v) = serde_json::to_value(&part) {
                *value = v;
            }
        }
    }
}

/// Masks every tool request of `messages` that records a redaction (a
/// transcript as an approver reads it).
pub fn redact_messages(messages: &mut [Message]) {
    for m in messages {
        for part in &mut m.content {
            if part.as_tool_request().is_some() {
                redact_part(part);
            }
        }
    }
}

/// Masks every tool-request part found anywhere in `value` (a run's
/// output, a trace, an event as JSON) that records a redaction.
pub fn redact_json(value: &mut Value) {
    match value {
        Value::Object(map) if map.contains_key("toolRequest") => {
            if let Ok(mut part) = serde_json::from_value::<Part>(Value::Object(map.clone())) {
                redact_part(&mut part);
                if let Ok(v) = serde_json::to_value(&part) {
                    *value = v;
                }
            }
        }
        Value::Object(map) => map.values_mut().for_each(redact_json),
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        _ => {}
    }
}

/// Restores, in the restart directives of `resume`, every masked value
/// that the paused call they answer (in `history`'s last model message,
/// or nested in one of its surfaced holds) has at a redacted path: in the
/// directive's input and in its declared `replacedInput`.
pub fn unmask_resume(history: &[Message], resume: &mut Resume) {
    let Some(last) = history.iter().rev().find(|m| m.role == crate::message::Role::Model) else {
        return;
    };
    // Only a paused call that records a redaction, or a surfaced hold
    // (whose child parts may), has anything to restore: the others are
    // not copied.
    let may_mask = |p: &&Part| {
        p.is_interrupt()
            && (p.meta(metadata::REDACT).is_some() || crate::message::surfaced::SurfacedHold::is_surfaced(p))
    };
    if resume.restart.is_empty() || !last.content.iter().any(|p| may_mask(&p)) {
        return;
    }
    let paused: Vec<Part> = last
        .content
        .iter()
        .filter(may_mask)
        .flat_map(crate::message::surfaced::answerable)
        .collect();
    for directive in &mut resume.restart {
        let Some(req) = directive.as_tool_request() else {
            continue;
        };
        let Some(target) = paused.iter().find(|p| {
            p.as_tool_request()
                .is_some_and(|r| r.name == req.name && r.reference == req.reference)
        }) else {
            continue;
        };
        let redaction = Redaction::on(target);
        if redaction.is_empty() {
            continue;
        }
        let original = target
            .as_tool_request()
            .and_then(|r| r.input.clone())
            .unwrap_or(Value::Null);
        if let Some(input) = directive.as_tool_request_mut().and_then(|r| r.input.as_mut()) {
            redaction.restore(input, &original);
        }
        if let Some(declared) = directive
            .metadata
            .as_mut()
            .and_then(|m| m.get_mut(metadata::REPLACED_INPUT))
        {
            redaction.restore(declared, &original);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn masked(paths: &[&str], mut v: Value) -> Value {
        Redaction::parse(paths).unwrap().mask(&mut v);
        v
    }

    #[test]
    fn paths_reach_nested_keys_arrays_and_wildcards() {
        let input = json!({
            "card": {"number": "4111", "cvv": "123"},
            "items": [{"pin": "1"}, {"pin": "2", "name": "x"}],
            "deep": {"a": {"password": "p"}, "password": "q"},
        });
        assert_eq!(
            masked(&["card.number"], input.clone())["card"],
            json!({"number": MASK, "cvv": "123"})
        );
        assert_eq!(
            masked(&["items[*].pin"], input.clone())["items"],
            json!([{"pin": MASK}, {"pin": MASK, "name": "x"}])
        );
        assert_eq!(
            masked(&["items[1]"], input.clone())["items"],
            json!([{"pin": "1"}, MASK])
        );
        assert_eq!(masked(&["*.cvv"], input.clone())["card"]["cvv"], json!(MASK));
        let deep = masked(&["**.password"], input.clone());
        assert_eq!(deep["deep"], json!({"a": {"password": MASK}, "password": MASK}));
        // A path that does not match changes nothing.
        assert_eq!(masked(&["nope.x", "card.number.x"], input.clone()), input);
    }

    #[test]
    fn bad_paths_are_refused_with_the_reason() {
        for bad in ["", "a..b", "a[", "a[x]", "a]b", "a*b", "a[0]b"] {
            let e = RedactPath::parse(bad).unwrap_err();
            assert_eq!(e.path, bad);
        }
    }

    #[test]
    fn parts_inside_any_json_are_masked_by_their_own_paths() {
        let mut out = json!({"message": {"content": [
            {"toolRequest": {"name": "pay", "input": {"card": "4111", "amount": 5}}, "metadata": {"interrupt": true, "redact": ["card"]}},
            {"toolRequest": {"name": "other", "input": {"card": "4222"}}},
        ]}});
        redact_json(&mut out);
        assert_eq!(
            out["message"]["content"][0]["toolRequest"]["input"],
            json!({"card": MASK, "amount": 5})
        );
        assert_eq!(
            out["message"]["content"][1]["toolRequest"]["input"],
            json!({"card": "4222"})
        );
    }

    #[test]
    fn restore_puts_back_only_masked_values() {
        let r = Redaction::parse(["card.number", "items[*].pin"]).unwrap();
        let original = json!({"card": {"number": "4111"}, "amount": 5, "items": [{"pin": "1"}, {"pin": "2"}]});
        let mut shown = original.clone();
        r.mask(&mut shown);
        // An edit that changed the amount and kept the masks.
        shown["amount"] = json!(7);
        shown["items"][1]["pin"] = json!("9");
        r.restore(&mut shown, &original);
        assert_eq!(
            shown,
            json!({"card": {"number": "4111"}, "amount": 7, "items": [{"pin": "1"}, {"pin": "9"}]})
        );
    }
}
