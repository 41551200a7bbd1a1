//! "What will happen": a tool's preview of a held call, made when the hold
//! is (docs/reference.md §22.2).
//!
//! Invariants: a preview is pure and bounded in time. It sees the input as
//! an approver may see it (redacted), never the secrets; it runs once,
//! when the call is held, and its result is stored on the paused part, so
//! every surface shows the same words. A preview that fails, panics or
//! runs past [`PREVIEW_TIMEOUT`] leaves the raw (redacted) input shown and
//! never stops the hold from being made.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long a preview may run.
pub const PREVIEW_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest summary kept (longer ones are cut with `…`).
const MAX_SUMMARY: usize = 200;

/// The most fields kept.
const MAX_FIELDS: usize = 32;

/// One labelled value of a [`Preview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewField {
    /// What it is ("From", "Amount").
    pub label: String,
    /// Its value as a person reads it ("$18,300.00").
    pub value: String,
}

/// What a held call will do, in words an approver can check: a one-line
/// summary, labelled fields, optionally a diff and a count of what it
/// touches, and the parts of the input it could not show.
///
/// ```
/// use holdpoint::review::Preview;
/// let p = Preview::new("Transfer $18,300.00 from checking to acct-4471")
///     .field("Amount", "$18,300.00")
///     .field("To", "acct-4471")
///     .touches(1);
/// assert_eq!(p.fields.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The hold's headline: what the inbox, notifications, the CLI and the
    /// protocols show for it.
    pub summary: String,
    /// Labelled values, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<PreviewField>,
    /// A diff of what would change, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// How many things the call touches (rows, files, accounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touches: Option<u64>,
    /// Parts of the input the preview cannot show (a blob, a script): a
    /// rule with `require_preview` makes such a hold unapprovable as is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unshown: Vec<String>,
}

impl Preview {
    /// A preview with this summary.
    pub fn new(summary: impl Into<String>) -> Self {
        Preview {
            summary: summary.into(),
            fields: Vec::new(),
            diff: None,
            touches: None,
            unshown: Vec::new(),
        }
    }

    /// The same preview with a labelled value.
    pub fn field(mut self, label: impl Into<String>, value: impl Into<String>) -> Self {
        self.fields.push(PreviewField {
            label: label.into(),
            value: value.into(),
        });
        self
    }

    /// The same preview with a diff.
    pub fn diff(mut self, diff: impl Into<String>) -> Self {
        self.diff = Some(diff.into());
        self
    }

    /// The same preview with a count of what the call touches.
    pub fn touches(mut self, n: u64) -> Self {
        self.touches = Some(n);
        self
    }

    /// The same preview naming a part of the input it cannot show.
    pub fn unshown(mut self, what: impl Into<String>) -> Self {
        self.unshown.push(what.into());
        self
    }

    /// The preview a paused part records, when it has one.
    pub fn on(part: &crate::message::Part) -> Option<Preview> {
        let value = part.meta(crate::message::metadata::PREVIEW)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Cut to the stored bounds.
    fn bounded(mut self) -> Self {
        if self.summary.chars().count() > MAX_SUMMARY {
            self.summary = self.summary.chars().take(MAX_SUMMARY - 1).collect::<String>() + "…";
        }
        self.fields.truncate(MAX_FIELDS);
        self
    }
}

/// A tool's preview function: the (redacted) input in, a [`Preview`] or
/// why it could not make one out.
pub type PreviewFn = Arc<dyn Fn(&Value) -> Result<Preview, String> + Send + Sync>;

/// What became of a preview: stored on the paused part under `preview`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewOutcome {
    /// The tool previewed the call.
    Made(Preview),
    /// It failed, panicked or ran too long; the raw input is shown.
    Failed(String),
}

impl PreviewOutcome {
    /// The metadata value: the preview, or `{"error": why}`.
    pub fn to_value(&self) -> Value {
        match self {
            PreviewOutcome::Made(p) => serde_json::to_value(p).unwrap_or(Value::Null),
            PreviewOutcome::Failed(why) => serde_json::json!({ "error": why }),
        }
    }
}

/// Runs `preview` on `input` off the async threads, for at most
/// [`PREVIEW_TIMEOUT`].
pub async fn run_preview(preview: PreviewFn, input: Value) -> PreviewOutcome {
    run_preview_within(preview, input, PREVIEW_TIMEOUT).await
}

/// [`run_preview`] with a bound of `limit`.
pub async fn run_preview_within(preview: PreviewFn, input: Value, limit: Duration) -> PreviewOutcome {
    let task = tokio::task::spawn_blocking(move || preview(&input));
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(Ok(p))) => PreviewOutcome::Made(p.bounded()),
        Ok(Ok(Err(why))) => PreviewOutcome::Failed(why),
        Ok(Err(_)) => PreviewOutcome::Failed("the preview panicked".into()),
        Err(_) => PreviewOutcome::Failed(format!("the preview ran longer than {} ms", limit.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_preview_that_fails_panics_or_hangs_is_a_failure_not_a_stop() {
        let ok: PreviewFn = Arc::new(|v: &Value| Ok(Preview::new(format!("pay {}", v["amount"]))));
        assert_eq!(
            run_preview(ok, json!({"amount": 5})).await,
            PreviewOutcome::Made(Preview::new("pay 5"))
        );
        let err: PreviewFn = Arc::new(|_: &Value| Err("no account".to_owned()));
        assert_eq!(
            run_preview(err, json!({})).await,
            PreviewOutcome::Failed("no account".into())
        );
        let panics: PreviewFn = Arc::new(|_: &Value| panic!("boom"));
        assert!(matches!(
            run_preview(panics, json!({})).await,
            PreviewOutcome::Failed(_)
        ));
        let slow: PreviewFn = Arc::new(|_: &Value| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(Preview::new("late"))
        });
        let out = run_preview_within(slow, json!({}), Duration::from_millis(20)).await;
        assert!(
            matches!(out, PreviewOutcome::Failed(ref w) if w.contains("longer")),
            "{out:?}"
        );
    }
}
