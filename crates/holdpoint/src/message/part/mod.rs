//! `Part`: one piece of a message, decoded by field presence ([`wire`]);
//! the paused-request helpers are in [`interrupt`].

mod interrupt;
mod wire;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::metadata::{self, Metadata};
use crate::error::{Error, Result};

pub use interrupt::InterruptAsError;

/// A media reference: `{contentType, url}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Media {
    /// MIME type, e.g. `image/png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// A URL or a `data:` URI.
    pub url: String,
}

/// A resource reference: `{uri}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// The resource URI.
    pub uri: String,
}

/// A model's request to call a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The tool's name.
    pub name: String,
    /// Identifies the call within one model message; matched with `name`.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The arguments the model produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// A tool's answer to a [`ToolRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResponse {
    /// The tool's name.
    pub name: String,
    /// The ref of the request this answers.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The tool's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Extra parts the tool attached to its response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<Part>>,
}

/// What a [`Part`] holds: exactly one of these.
#[derive(Debug, Clone, PartialEq)]
pub enum PartKind {
    /// Plain text.
    Text(String),
    /// A media reference.
    Media(Media),
    /// Arbitrary structured data.
    Data(Value),
    /// A request to call a tool.
    ToolRequest(ToolRequest),
    /// A tool's answer.
    ToolResponse(ToolResponse),
    /// A resource reference.
    Resource(Resource),
    /// Provider- or application-specific content.
    Custom(Value),
    /// Model reasoning text.
    Reasoning(String),
}

impl PartKind {
    /// The wire key of this kind, e.g. `toolRequest`.
    pub fn key(&self) -> &'static str {
        match self {
            PartKind::Text(_) => "text",
            PartKind::Media(_) => "media",
            PartKind::Data(_) => "data",
            PartKind::ToolRequest(_) => "toolRequest",
            PartKind::ToolResponse(_) => "toolResponse",
            PartKind::Resource(_) => "resource",
            PartKind::Custom(_) => "custom",
            PartKind::Reasoning(_) => "reasoning",
        }
    }
}

/// One piece of a [`Message`](super::Message): a kind plus optional metadata.
///
/// ```
/// use holdpoint::Part;
/// let part: Part = serde_json::from_str(r#"{"text":"hi"}"#)?;
/// assert_eq!(part.as_text(), Some("hi"));
/// assert!(serde_json::from_str::<Part>(r#"{"text":"hi","data":1}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// What the part holds.
    pub kind: PartKind,
    /// Optional metadata (interrupt state lives here).
    pub metadata: Option<Metadata>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_kind(PartKind::Text(text.into()))
    }

    /// A data part.
    pub fn data(data: Value) -> Self {
        Self::from_kind(PartKind::Data(data))
    }

    /// A tool-request part.
    pub fn tool_request(name: impl Into<String>, reference: Option<String>, input: Option<Value>) -> Self {
        Self::from_kind(PartKind::ToolRequest(ToolRequest {
            name: name.into(),
            reference,
            input,
        }))
    }

    /// A tool-response part.
    pub fn tool_response(name: impl Into<String>, reference: Option<String>, output: Option<Value>) -> Self {
        Self::from_kind(PartKind::ToolResponse(ToolResponse {
            name: name.into(),
            reference,
            output,
            content: None,
        }))
    }

    /// A part of the given kind with no metadata.
    pub fn from_kind(kind: PartKind) -> Self {
        Part { kind, metadata: None }
    }

    /// Decodes a part from JSON text, with a typed error on bad input.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| Error::InvalidArgument(format!("invalid part: {e}")))
    }

    /// The text, when this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.kind {
            PartKind::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The tool request, when this is a tool-request part.
    pub fn as_tool_request(&self) -> Option<&ToolRequest> {
        match &self.kind {
            PartKind::ToolRequest(r) => Some(r),
            _ => None,
        }
    }

    /// The tool request, mutably.
    pub fn as_tool_request_mut(&mut self) -> Option<&mut ToolRequest> {
        match &mut self.kind {
            PartKind::ToolRequest(r) => Some(r),
            _ => None,
        }
    }

    /// The tool response, when this is a tool-response part.
    pub fn as_tool_response(&self) -> Option<&ToolResponse> {
        match &self.kind {
            PartKind::ToolResponse(r) => Some(r),
            _ => None,
        }
    }

    /// Reads a metadata value.
    pub fn meta(&self, key: &str) -> Option<&Value> {
        self.metadata.as_ref().and_then(|m| m.get(key))
    }

    /// Sets a metadata value.
    pub fn set_meta(&mut self, key: &str, value: Value) {
        self.metadata
            .get_or_insert_with(Metadata::new)
            .insert(key.to_owned(), value);
    }

    /// Removes a metadata value, dropping the map when it becomes empty.
    pub fn remove_meta(&mut self, key: &str) -> Option<Value> {
        let meta = self.metadata.as_mut()?;
        let old = meta.remove(key);
        if meta.is_empty() {
            self.metadata = None;
        }
        old
    }
}

#[cfg(test)]
mod tests;
