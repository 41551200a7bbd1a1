//! [`ConfigError`]: where in which file a configuration is wrong, and why.

use std::path::{Path, PathBuf};

/// What kind of mistake a [`ConfigError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io,
    /// Not TOML, or a value of the wrong type, or a required key missing.
    Syntax,
    /// A key this version does not know (a typo, or a newer setting).
    UnknownKey,
    /// A key given twice in one table, or an API key or principal listed
    /// twice.
    DuplicateKey,
    /// A CEL condition (`when`) that does not compile, or another rule
    /// field [`Policy::new`](holdpoint::approval::Policy::new) refuses.
    Rule,
    /// A role named in `approvers`, `escalate_to` or `roles` that neither an
    /// API key nor `[auth] roles` declares.
    UnknownRole,
    /// A URL that is not `http://` or `https://`.
    Url,
    /// A secret of the wrong form (a webhook secret that is not `whsec_`
    /// and base64).
    Secret,
    /// A duration that is not a number and a unit (`"30s"`, `"4h"`).
    Duration,
    /// Any other value that is not allowed (an empty name, a port of 0,
    /// settings that need each other).
    Invalid,
}

/// A configuration that cannot be used: the file, the line and column
/// (1-based; 0 when there is no position, as for a file that cannot be
/// read), the key (a dotted path such as `approval.rules[0].when`, indexes
/// 0-based) and what is wrong.
///
/// Messages never quote a secret's value (API keys, webhook secrets,
/// passwords, header and environment values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}", self.location(), self.message)]
pub struct ConfigError {
    /// The configuration file.
    pub file: PathBuf,
    /// The line (1-based; 0: none).
    pub line: usize,
    /// The column (1-based; 0: none).
    pub column: usize,
    /// The key at fault, as a dotted path, when known.
    pub key: Option<String>,
    /// The kind of mistake.
    pub kind: ConfigErrorKind,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    fn location(&self) -> String {
        let mut at = self.file.display().to_string();
        if self.line > 0 {
            at.push_str(&format!(":{}:{}", self.line, self.column));
        }
        at.push_str(": ");
        if let Some(key) = &self.key {
            at.push_str(&format!("`{key}`: "));
        }
        at
    }

    pub(super) fn io(file: &Path, err: &std::io::Error) -> Self {
        ConfigError {
            file: file.to_owned(),
            line: 0,
            column: 0,
            key: None,
            kind: ConfigErrorKind::Io,
            message: format!("cannot read the configuration file: {err}"),
        }
    }
}

/// Turns byte offsets into lines and columns, and builds errors.
pub(super) struct Source<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
}

impl Source<'_> {
    /// The 1-based line and column of byte `offset`.
    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(1, |s| s.chars().count() + 1);
        (line, column)
    }

    /// An error at byte `offset` about `key`.
    pub(super) fn error(
        &self,
        offset: usize,
        key: impl Into<String>,
        kind: ConfigErrorKind,
        message: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = self.position(offset);
        let key = key.into();
        ConfigError {
            file: self.file.to_owned(),
            line,
            column,
            key: (!key.is_empty()).then_some(key),
            kind,
            message: message.into(),
        }
    }
}
