//! The errors of this crate.

/// What is wrong with an [`A2aAgentTool`](crate::A2aAgentTool)'s
/// configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum A2aError {
    /// The agent's URL does not parse.
    #[error("A2A agent URL {url:?}: {message}")]
    Url {
        /// The URL given.
        url: String,
        /// Why it does not parse.
        message: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("A2A header {name:?}: {message}")]
    Header {
        /// The header's name.
        name: String,
        /// Why it is refused.
        message: String,
    },
}
