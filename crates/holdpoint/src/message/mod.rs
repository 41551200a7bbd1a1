//! Messages and parts: the wire types of docs/reference.md §2, in Genkit's JSON shapes.

mod json;
pub mod metadata;
mod part;
pub(crate) mod resume;
pub(crate) mod surfaced;

use serde::{Deserialize, Serialize};

pub use json::{canonical_json, json_eq};
pub use metadata::Metadata;
pub use part::{InterruptAsError, Media, Part, PartKind, Resource, ToolRequest, ToolResponse};

use crate::error::{Error, Result};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person or program driving the agent.
    User,
    /// The model.
    Model,
    /// Tool results.
    Tool,
    /// System instructions.
    System,
}

/// A message: a role and its parts.
///
/// ```
/// use holdpoint::Message;
/// let m = Message::user_text("hi");
/// assert_eq!(serde_json::to_string(&m)?, r#"{"role":"user","content":[{"text":"hi"}]}"#);
/// assert!(serde_json::from_str::<Message>(r#"{"role":"robot","content":[]}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// A field Holdpoint does not know is ignored and dropped, in the message
/// and its parts, as Genkit's decoders do; a known field of the wrong type
/// is refused (docs/reference.md, "Unknown fields").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its parts, in order.
    pub content: Vec<Part>,
    /// Optional metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, content: Vec<Part>) -> Self {
        Message {
            role,
            content,
            metadata: None,
        }
    }

    /// A user message with one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::text(text)])
    }

    /// A model message with one text part.
    pub fn model_text(text: impl Into<String>) -> Self {
        Self::new(Role::Model, vec![Part::text(text)])
    }

    /// Decodes a message from JSON text, with a typed error on bad input.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| Error::InvalidArgument(format!("invalid message: {e}")))
    }

    /// All text parts, concatenated.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(Part::as_text).collect()
    }

    /// The tool-request parts, in order.
    pub fn tool_requests(&self) -> impl Iterator<Item = &Part> {
        self.content.iter().filter(|p| p.as_tool_request().is_some())
    }

    /// The paused (interrupted, unanswered) tool requests, in order.
    pub fn interrupts(&self) -> impl Iterator<Item = &Part> {
        self.content.iter().filter(|p| p.is_interrupt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_role_is_a_clear_error() {
        let err = Message::from_json(r#"{"role":"robot","content":[]}"#).unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument);
        assert!(err.to_string().contains("robot"), "{err}");
    }

    #[test]
    fn text_concatenates_text_parts() {
        let m = Message::new(
            Role::Model,
            vec![Part::text("a"), Part::data(serde_json::json!(1)), Part::text("b")],
        );
        assert_eq!(m.text(), "ab");
    }
}
