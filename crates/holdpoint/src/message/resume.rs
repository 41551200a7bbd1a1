//! The answers to a paused generation as they arrive ([`Resume`]): plain
//! data over [`Part`]s, below the review that unmasks them and the
//! generate loop that validates and applies them; `generate` re-exports it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Part;

/// The answers to a paused generation: restart directives (re-run a call)
/// and respond directives (supply its output).
///
/// Unknown fields are ignored, as in [`Message`](super::Message).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resume {
    /// Tool-request parts marked `resumed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart: Vec<Part>,
    /// Tool-response parts answering paused calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub respond: Vec<Part>,
    /// Free-form metadata some clients (Genkit's) attach; not interpreted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl Resume {
    /// Sorts directive parts into restarts and responds by their kind.
    pub fn from_parts(parts: impl IntoIterator<Item = Part>) -> Self {
        let mut resume = Resume::default();
        for p in parts {
            if p.as_tool_response().is_some() {
                resume.respond.push(p);
            } else {
                resume.restart.push(p);
            }
        }
        resume
    }

    /// Whether there is no directive at all.
    pub fn is_empty(&self) -> bool {
        self.restart.is_empty() && self.respond.is_empty()
    }
}
