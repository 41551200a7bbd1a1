//! The errors of building a notifier.

/// A configuration the notifier refuses at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// A URL that does not parse or is not http(s).
    #[error("{what}: {message}")]
    BadUrl {
        /// Which setting (`notify.webhooks[0].url`, …; never the URL itself).
        what: String,
        /// Why.
        message: String,
    },
    /// A webhook secret that does not decode (base64 after `whsec_`).
    #[error("{what}: the secret does not decode: {message}")]
    BadSecret {
        /// Which setting.
        what: String,
        /// Why (never the secret).
        message: String,
    },
    /// An unknown event type in a channel's `events`.
    #[error("{what}: unknown event type `{event}` (known: {known})")]
    UnknownEvent {
        /// Which setting.
        what: String,
        /// The unknown name.
        event: String,
        /// The known names.
        known: String,
    },
    /// Email channels without `[notify.smtp]`, or another inconsistency.
    #[error("{0}")]
    Invalid(String),
}
