//! TOML and serde errors: syntax, types, unknown and duplicate keys, each
//! reported at its span without quoting the source line.

use crate::config::error::{ConfigError, ConfigErrorKind as K, Source};
use crate::config::raw::RawConfig;

/// TOML and serde: syntax, types, unknown and duplicate keys.
pub(super) fn parse(src: &Source<'_>) -> Result<RawConfig, ConfigError> {
    let de = toml::Deserializer::parse(src.text).map_err(|e| toml_error(src, &e, String::new()))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        toml_error(src, e.inner(), path)
    })
}

/// An error of the `toml` crate, by its span and message only (its
/// `Display` quotes the source line, which may hold a secret; values in
/// type errors are left out for the same reason).
fn toml_error(src: &Source<'_>, err: &toml::de::Error, path: String) -> ConfigError {
    let message = err.message().trim().to_owned();
    let offset = err.span().map_or(0, |s| s.start);
    // `Spanned` values deserialize through a private field of this name.
    let path = path
        .split('.')
        .filter(|p| !p.starts_with("$__serde_spanned"))
        .collect::<Vec<_>>()
        .join(".");
    let path = if path == "." { String::new() } else { path };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        // The path already ends in the unknown key.
        let key = if path.is_empty() { field.to_owned() } else { path };
        let known = expected
            .trim_start_matches(", expected ")
            .trim_start_matches("one of ")
            .replace('`', "");
        let message = if known.is_empty() {
            format!("unknown key `{field}`")
        } else {
            format!("unknown key `{field}` (known: {known})")
        };
        return src.error(offset, key, K::UnknownKey, message);
    }
    if message.contains("duplicate key") {
        let key = key_at(src.text, offset);
        return src.error(
            offset,
            key,
            K::DuplicateKey,
            "this key is given twice in the same table",
        );
    }
    let message = match message.split_once(": ") {
        Some((what @ ("invalid type" | "invalid value" | "invalid length"), detail)) => {
            let (found, expected) = detail.split_once(", expected ").unwrap_or((detail, "another value"));
            let found = found.split([' ', '`', '"']).next().unwrap_or("value");
            format!("{what}: expected {expected}, found {found}")
        }
        _ => message.replace("missing field", "missing key"),
    };
    let message = message.replace("expected i64", "expected an integer");
    src.error(offset, path, K::Syntax, message)
}

/// The dotted name of the key or table header at `offset`: the header's
/// own name when it is on a `[table]` line, else the enclosing header's
/// name and the key.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text.get(..offset).and_then(|t| t.rfind('\n')).map_or(0, |i| i + 1);
    let line = text.get(line_start..).unwrap_or("").lines().next().unwrap_or("");
    let header = |l: &str| {
        let l = l.trim();
        l.starts_with('[')
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    };
    if let Some(h) = header(line) {
        return h;
    }
    let name: String = text
        .get(offset..)
        .unwrap_or("")
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '=')
        .collect();
    let table = text.get(..line_start).unwrap_or("").lines().rev().find_map(header);
    match table {
        Some(t) if !t.is_empty() => format!("{t}.{name}"),
        _ => name,
    }
}
