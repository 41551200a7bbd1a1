//! A failed turn's output inside [`Error::TurnFailed`]: the error module
//! sits below this one and holds the output through its `TurnOutput`
//! trait; here the output goes in and comes back out as an
//! [`AgentOutput`].

use std::any::Any;
use std::ops::Deref;

use crate::error::{Error, ErrorBody, FailedTurn, TurnOutput};

use super::io::AgentOutput;

impl TurnOutput for AgentOutput {
    fn error_body(&self) -> Option<&ErrorBody> {
        self.error.as_ref()
    }

    fn clone_boxed(&self) -> Box<dyn TurnOutput> {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send + Sync> {
        self
    }
}

impl FailedTurn {
    /// Carries `out` (a failed output) in an error.
    pub fn new(out: AgentOutput) -> Self {
        FailedTurn(Box::new(out))
    }

    /// The output, boxed.
    pub fn into_boxed(self) -> Box<AgentOutput> {
        match self.0.into_any().downcast::<AgentOutput>() {
            Ok(out) => out,
            Err(_) => unreachable!("a FailedTurn is only built from an AgentOutput"),
        }
    }

    /// The output.
    pub fn into_output(self) -> AgentOutput {
        *self.into_boxed()
    }
}

impl Deref for FailedTurn {
    type Target = AgentOutput;

    fn deref(&self) -> &AgentOutput {
        let any: &dyn Any = &*self.0;
        match any.downcast_ref::<AgentOutput>() {
            Some(out) => out,
            None => unreachable!("a FailedTurn is only built from an AgentOutput"),
        }
    }
}

impl From<AgentOutput> for FailedTurn {
    fn from(out: AgentOutput) -> Self {
        FailedTurn::new(out)
    }
}

impl Error {
    /// The failed turn's output, for [`Error::TurnFailed`].
    pub fn failed_output(&self) -> Option<&AgentOutput> {
        match self {
            Error::TurnFailed(out) => Some(out),
            _ => None,
        }
    }

    /// The failed turn's output, for [`Error::TurnFailed`]; any other
    /// error back as itself.
    pub fn into_failed_output(self) -> Result<AgentOutput, Error> {
        match self {
            Error::TurnFailed(out) => Ok(out.into_output()),
            other => Err(other),
        }
    }
}
