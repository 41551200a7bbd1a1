//! What a call to a remote agent can fail with.

use holdpoint::agent::AgentOutput;
use holdpoint::{FinishReason, Status};

/// A failed call to a remote agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server could not be reached, or the connection broke.
    #[error("cannot reach {url}: {message}")]
    Transport {
        /// The URL called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The server answered with an error (`{"error": {"status", "message"}}`).
    #[error("{status:?} (HTTP {http}): {message}")]
    Server {
        /// The HTTP status code (0 for an error frame of a stream).
        http: u16,
        /// The wire status (`NOT_FOUND`, `ABORTED`, …).
        status: Status,
        /// The server's message.
        message: String,
    },
    /// The answer was not what the protocol says.
    #[error("unexpected answer from {url}: {message}")]
    Protocol {
        /// The URL called.
        url: String,
        /// What was wrong with it.
        message: String,
    },
    /// The turn failed: the output carries its snapshot id, state and error.
    #[error("the turn failed: {}", .0.error.as_ref().map_or("no error given", |e| e.message.as_str()))]
    TurnFailed(Box<AgentOutput>),
    /// An error of the core, passed on by `?` in code that mixes in-process
    /// and remote calls (a tool's typed claim, a policy, a resume built by
    /// hand). A core [`holdpoint::Error::TurnFailed`] becomes
    /// [`ClientError::TurnFailed`] instead, so a failed turn is one variant
    /// wherever it ran.
    #[error(transparent)]
    Core(holdpoint::Error),
}

impl From<holdpoint::Error> for ClientError {
    fn from(error: holdpoint::Error) -> Self {
        match error {
            holdpoint::Error::TurnFailed(out) => ClientError::TurnFailed(out.into_boxed()),
            other => ClientError::Core(other),
        }
    }
}

impl ClientError {
    /// The wire status of a server error, a failed turn or a core error;
    /// `None` for transport and protocol errors.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Server { status, .. } => Some(*status),
            ClientError::TurnFailed(out) => out.error.as_ref().map(|e| e.status),
            ClientError::Core(error) => Some(error.status()),
            _ => None,
        }
    }

    pub(crate) fn protocol(url: &str, message: impl Into<String>) -> Self {
        ClientError::Protocol {
            url: url.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn transport(url: &str, err: impl std::fmt::Display) -> Self {
        ClientError::Transport {
            url: url.to_owned(),
            message: err.to_string(),
        }
    }
}

/// A failed turn is an `Err`, as in process.
pub(crate) fn fail_loudly(out: AgentOutput) -> Result<AgentOutput> {
    if out.finish_reason == FinishReason::Failed {
        return Err(ClientError::TurnFailed(Box::new(out)));
    }
    Ok(out)
}

/// A result of this crate.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
