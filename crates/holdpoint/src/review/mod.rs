//! What an approver sees of a held call (docs/reference.md §22):
//! redaction of secrets in its input, the tool's preview of what will
//! happen, and whether it can be approved as is.
//!
//! A tool declares its part with a [`HoldView`] (redaction paths and a
//! preview function); an approval rule adds its own paths and its review
//! limits ([`RuleSpec`](crate::approval::RuleSpec)'s `redact`,
//! `max_review_bytes`, `require_preview`). When a call is held,
//! [`describe_hold`] records all of it on the paused part (`redact`,
//! `preview`, `unapprovable`), so every surface — listings, the inbox and
//! its transcript, notifications, the audit, the CLI, AG-UI and A2A —
//! reads the same words from the snapshot.

mod preview;
mod redact;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use preview::{PREVIEW_TIMEOUT, Preview, PreviewField, PreviewFn, PreviewOutcome, run_preview, run_preview_within};
pub use redact::{
    MASK, RedactPath, RedactPathError, Redaction, redact_json, redact_messages, redact_part, unmask_resume,
};

use crate::hold::HoldRule;
use crate::message::metadata::{APPROVAL_RULE, CARRIED_META};

/// How a tool's held calls are shown: the input paths to mask and a
/// preview of what the call will do.
///
/// ```
/// use holdpoint::review::{HoldView, Preview};
/// let view = HoldView::new()
///     .redact(["card.number", "card.cvv"])?
///     .preview(|input| {
///         let amount = input["amount"].as_f64().ok_or("no amount")?;
///         Ok(Preview::new(format!("Charge ${amount:.2}")))
///     });
/// assert!(!view.redaction().is_empty());
/// # Ok::<(), holdpoint::review::RedactPathError>(())
/// ```
#[derive(Clone, Default)]
pub struct HoldView {
    redaction: Redaction,
    preview: Option<PreviewFn>,
}

impl std::fmt::Debug for HoldView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldView")
            .field("redaction", &self.redaction)
            .field("preview", &self.preview.is_some())
            .finish()
    }
}

impl HoldView {
    /// A view that masks nothing and previews nothing.
    pub fn new() -> Self {
        HoldView::default()
    }

    /// The same view masking `paths` too.
    pub fn redact<S: AsRef<str>>(mut self, paths: impl IntoIterator<Item = S>) -> Result<Self, RedactPathError> {
        self.redaction.extend(&Redaction::parse(paths)?);
        Ok(self)
    }

    /// The same view with a preview. `f` gets the input as approvers see
    /// it (redacted); it must be pure and quick (it is stopped waiting for
    /// after [`PREVIEW_TIMEOUT`]).
    pub fn preview<F>(mut self, f: F) -> Self
    where
        F: Fn(&Value) -> Result<Preview, String> + Send + Sync + 'static,
    {
        self.preview = Some(Arc::new(f));
        self
    }

    /// The paths it masks.
    pub fn redaction(&self) -> &Redaction {
        &self.redaction
    }

    /// Its preview function.
    pub fn preview_fn(&self) -> Option<&PreviewFn> {
        self.preview.as_ref()
    }
}

/// Records on the interrupt `data` of a call just held what its view and
/// its rule (already carried in `data`) say about showing it: the paths
/// to mask, the preview of `input` (when the tool has one; it sees the
/// masked input), and — under a rule with `require_preview` — why it is
/// not approvable without a full preview. The generate loop moves these
/// to the paused part's metadata.
pub async fn describe_hold(view: Option<&HoldView>, input: Option<Value>, data: &mut Map<String, Value>) {
    // Read from the carried rule without decoding it whole: most holds
    // have no view and a rule that masks nothing, and cost nothing here.
    let carried_rule = data.get(carried(APPROVAL_RULE));
    let rule_paths = carried_rule
        .and_then(|r| r.get("redact"))
        .and_then(Value::as_array)
        .filter(|paths| !paths.is_empty());
    let require_preview = carried_rule.and_then(|r| r.get("requirePreview")) == Some(&Value::Bool(true));
    if view.is_none() && rule_paths.is_none() && !require_preview {
        return;
    }
    let rule: Option<HoldRule> = carried_rule.and_then(|v| serde_json::from_value(v.clone()).ok());
    let mut redaction = view.map(|v| v.redaction.clone()).unwrap_or_default();
    if let Some(rule) = &rule
        && let Ok(paths) = Redaction::parse(&rule.redact)
    {
        redaction.extend(&paths);
    }
    if !redaction.is_empty() {
        data.insert(
            carried(crate::message::metadata::REDACT).to_owned(),
            redaction.to_value(),
        );
    }
    let outcome = match (view.and_then(HoldView::preview_fn), input) {
        (Some(f), Some(mut input)) => {
            redaction.mask(&mut input);
            let outcome = run_preview(Arc::clone(f), input).await;
            data.insert(
                carried(crate::message::metadata::PREVIEW).to_owned(),
                outcome.to_value(),
            );
            Some(outcome)
        }
        _ => None,
    };
    let unapprovable = carried(crate::message::metadata::UNAPPROVABLE);
    if let Some(rule) = rule.filter(|r| r.require_preview)
        && !data.contains_key(unapprovable)
    {
        let why = match &outcome {
            None => Some("the tool has no preview".to_owned()),
            Some(PreviewOutcome::Failed(e)) => Some(format!("its preview failed ({e})")),
            Some(PreviewOutcome::Made(p)) if !p.unshown.is_empty() => {
                Some(format!("its preview cannot show {}", p.unshown.join(", ")))
            }
            Some(PreviewOutcome::Made(_)) => None,
        };
        if let Some(why) = why {
            data.insert(
                unapprovable.to_owned(),
                Value::String(format!(
                    "approval rule \"{}\" approves only calls shown in full, and {why}: deny it or edit it",
                    rule.rule
                )),
            );
        }
    }
}

/// The interrupt-data key that carries the part-metadata key `key`.
fn carried(key: &str) -> &'static str {
    CARRIED_META.iter().find(|(_, k)| *k == key).map_or("", |(c, _)| c)
}
