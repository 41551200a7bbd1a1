//! `Part`: one piece of a message, decoded by field presence.

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::metadata::{self, Marker, Metadata};
use crate::error::{Error, Result};

/// Why [`Part::interrupt_as`] gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterruptAsError {
    /// The part is not a paused tool request: another kind of part, a
    /// request that did not pause, or one already answered.
    #[error("not a paused tool request: {what}")]
    NotAnInterrupt {
        /// What the part is instead.
        what: String,
    },
    /// The part is paused, but its interrupt data does not decode into the
    /// type asked for.
    #[error("interrupt data of tool \"{tool}\" does not decode: {message}")]
    Decode {
        /// The paused tool's name.
        tool: String,
        /// serde's explanation.
        message: String,
    },
}

impl From<InterruptAsError> for Error {
    fn from(e: InterruptAsError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}

/// A media reference: `{contentType, url}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Media {
    /// MIME type, e.g. `image/png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// A URL or a `data:` URI.
    pub url: String,
}

/// A resource reference: `{uri}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// The resource URI.
    pub uri: String,
}

/// A model's request to call a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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

    /// Whether this is a tool request that is paused and not yet answered.
    pub fn is_interrupt(&self) -> bool {
        self.as_tool_request().is_some() && metadata::is_set(self.metadata.as_ref(), metadata::INTERRUPT)
    }

    /// The interrupt data of a paused tool request (`{}` for a bare `true`).
    pub fn interrupt_data(&self) -> Option<serde_json::Map<String, Value>> {
        if !self.is_interrupt() {
            return None;
        }
        metadata::marker(self.metadata.as_ref(), metadata::INTERRUPT)
            .ok()
            .flatten()
            .map(Marker::into_object)
    }

    /// When this paused request stops being answerable: the `expiresAt`
    /// metadata key, or an `expiresAt` field of the interrupt data (RFC 3339).
    pub fn expires_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let raw = self
            .meta(metadata::EXPIRES_AT)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                self.meta(metadata::INTERRUPT)
                    .or_else(|| self.meta(metadata::RESOLVED_INTERRUPT))
                    .and_then(|d| d.get(metadata::EXPIRES_AT))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })?;
        chrono::DateTime::parse_from_rfc3339(&raw)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }

    /// The middleware that raised this hold, when one did.
    pub fn interrupted_by(&self) -> Option<&str> {
        self.meta(metadata::INTERRUPTED_BY).and_then(Value::as_str)
    }

    /// Decodes the interrupt data of a paused tool request into `T`.
    ///
    /// One result for both ways it can fail, told apart by
    /// [`InterruptAsError`]'s variant: the part is not a paused tool
    /// request, or its data does not decode. `?` turns either into an
    /// `INVALID_ARGUMENT` [`Error`].
    ///
    /// ```
    /// use holdpoint::message::{InterruptAsError, Part};
    /// #[derive(serde::Deserialize)]
    /// struct Ask { details: String }
    ///
    /// let mut paused = Part::tool_request("transferMoney", Some("0".into()), None);
    /// paused.set_meta("interrupt", serde_json::json!({"details": "Transfer $500.00 to savings"}));
    /// assert_eq!(paused.interrupt_as::<Ask>()?.details, "Transfer $500.00 to savings");
    /// assert!(matches!(Part::text("hi").interrupt_as::<Ask>(), Err(InterruptAsError::NotAnInterrupt { .. })));
    /// # Ok::<(), holdpoint::Error>(())
    /// ```
    pub fn interrupt_as<T: serde::de::DeserializeOwned>(&self) -> std::result::Result<T, InterruptAsError> {
        let Some(data) = self.interrupt_data() else {
            let what = match self.as_tool_request() {
                Some(req) => format!("tool request \"{}\" is not paused (or was already answered)", req.name),
                None => format!("a {} part", self.kind.key()),
            };
            return Err(InterruptAsError::NotAnInterrupt { what });
        };
        serde_json::from_value(Value::Object(data)).map_err(|source| InterruptAsError::Decode {
            tool: self.as_tool_request().map(|r| r.name.clone()).unwrap_or_default(),
            message: source.to_string(),
        })
    }

    fn paused_request(&self) -> Result<&ToolRequest> {
        match self.as_tool_request() {
            Some(req) => Ok(req),
            None => Err(Error::InvalidArgument(format!(
                "a resume directive needs a toolRequest part, got a {} part",
                self.kind.key()
            ))),
        }
    }

    /// Untyped restart: re-run this paused request, with optional resume data
    /// (a JSON object). Builds the same part as a typed `call.restart(..)`.
    pub fn restart(&self, resume: Option<Value>) -> Result<Part> {
        let req = self.paused_request()?;
        let marker = Marker::from_data(metadata::RESUMED, resume)?;
        let mut part = Part::tool_request(req.name.clone(), req.reference.clone(), req.input.clone());
        part.set_meta(metadata::RESUMED, marker.to_value());
        Ok(part)
    }

    /// Untyped restart with new input; `replacedInput` keeps the original.
    pub fn restart_with_input(&self, input: Value, resume: Option<Value>) -> Result<Part> {
        let req = self.paused_request()?;
        let original = req.input.clone().unwrap_or(Value::Null);
        let mut part = self.restart(resume)?;
        if let Some(r) = part.as_tool_request_mut() {
            r.input = Some(input);
        }
        part.set_meta(metadata::REPLACED_INPUT, original);
        Ok(part)
    }

    /// Untyped respond: answer this paused request with `output`, without
    /// running the tool.
    pub fn respond(&self, output: Value) -> Result<Part> {
        let req = self.paused_request()?;
        let mut part = Part::tool_response(req.name.clone(), req.reference.clone(), Some(output));
        part.set_meta(metadata::INTERRUPT_RESPONSE, Value::Bool(true));
        Ok(part)
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let len = 1 + usize::from(self.metadata.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        let key = self.kind.key();
        match &self.kind {
            PartKind::Text(t) | PartKind::Reasoning(t) => map.serialize_entry(key, t)?,
            PartKind::Media(m) => map.serialize_entry(key, m)?,
            PartKind::Data(v) | PartKind::Custom(v) => map.serialize_entry(key, v)?,
            PartKind::ToolRequest(r) => map.serialize_entry(key, r)?,
            PartKind::ToolResponse(r) => map.serialize_entry(key, r)?,
            PartKind::Resource(r) => map.serialize_entry(key, r)?,
        }
        if let Some(meta) = &self.metadata {
            map.serialize_entry("metadata", meta)?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    media: Option<Media>,
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
    #[serde(default)]
    tool_request: Option<ToolRequest>,
    #[serde(default)]
    tool_response: Option<ToolResponse>,
    #[serde(default)]
    resource: Option<Resource>,
    #[serde(default, deserialize_with = "present")]
    custom: Option<Value>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

/// Decodes a field that is there as `Some`, even when it is `null`: a part
/// is told apart by which fields it has, and `{"data": null}` is a data part
/// holding null (as encoding writes it), not a part without a kind.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let raw = RawPart::deserialize(deserializer)?;
        let mut kinds: Vec<PartKind> = Vec::with_capacity(1);
        if let Some(v) = raw.text {
            kinds.push(PartKind::Text(v));
        }
        if let Some(v) = raw.media {
            kinds.push(PartKind::Media(v));
        }
        if let Some(v) = raw.data {
            kinds.push(PartKind::Data(v));
        }
        if let Some(v) = raw.tool_request {
            kinds.push(PartKind::ToolRequest(v));
        }
        if let Some(v) = raw.tool_response {
            kinds.push(PartKind::ToolResponse(v));
        }
        if let Some(v) = raw.resource {
            kinds.push(PartKind::Resource(v));
        }
        if let Some(v) = raw.custom {
            kinds.push(PartKind::Custom(v));
        }
        if let Some(v) = raw.reasoning {
            kinds.push(PartKind::Reasoning(v));
        }
        if kinds.len() > 1 {
            let names: Vec<&str> = kinds.iter().map(PartKind::key).collect();
            return Err(de::Error::custom(format!(
                "a part holds exactly one kind, this one has fields of {}: {}",
                kinds.len(),
                names.join(", ")
            )));
        }
        let Some(kind) = kinds.pop() else {
            return Err(de::Error::custom(
                "a part needs one of text, media, data, toolRequest, toolResponse, resource, custom, reasoning",
            ));
        };
        if let Some(meta) = &raw.metadata {
            metadata::validate(meta).map_err(de::Error::custom)?;
        }
        Ok(Part {
            kind,
            metadata: raw.metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_genkit_shapes_byte_for_byte() {
        for text in [
            r#"{"text":"hi"}"#,
            r#"{"toolRequest":{"name":"t","ref":"1","input":{"a":1}},"metadata":{"interrupt":{"x":true}}}"#,
            r#"{"toolResponse":{"name":"t","ref":"1","output":"ok"},"metadata":{"interruptResponse":true}}"#,
            r#"{"media":{"contentType":"image/png","url":"data:x"}}"#,
            r#"{"data":[1,2]}"#,
            r#"{"resource":{"uri":"file:///a"}}"#,
            r#"{"custom":{"k":1}}"#,
            r#"{"reasoning":"hmm"}"#,
            r#"{"toolRequest":{"name":"t"}}"#,
        ] {
            let part: Part = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&part).unwrap(), text);
        }
    }

    #[test]
    fn two_kinds_are_rejected_naming_both() {
        let err = Part::from_json(r#"{"text":"a","toolRequest":{"name":"t"}}"#).unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument);
        let msg = err.to_string();
        assert!(msg.contains("text") && msg.contains("toolRequest"), "{msg}");
    }

    #[test]
    fn empty_and_unknown_fields_are_rejected() {
        assert!(Part::from_json("{}").unwrap_err().to_string().contains("needs one of"));
        assert!(
            Part::from_json(r#"{"txt":"a"}"#)
                .unwrap_err()
                .to_string()
                .contains("txt")
        );
    }

    #[test]
    fn non_object_interrupt_data_is_rejected() {
        let err = Part::from_json(r#"{"toolRequest":{"name":"t"},"metadata":{"interrupt":5}}"#).unwrap_err();
        assert!(err.to_string().contains("\"interrupt\" must be a JSON object"), "{err}");
        let err = Part::from_json(r#"{"toolRequest":{"name":"t"},"metadata":{"resumed":[1]}}"#).unwrap_err();
        assert!(err.to_string().contains("\"resumed\""), "{err}");
    }

    #[test]
    fn untyped_directives_build_expected_parts() {
        let mut paused = Part::tool_request("t", Some("r".into()), Some(json!({"a": 1})));
        paused.set_meta(metadata::INTERRUPT, json!({"why": "ask"}));
        let restart = paused.restart(Some(json!({"ok": true}))).unwrap();
        assert_eq!(
            serde_json::to_value(&restart).unwrap(),
            json!({"toolRequest": {"name": "t", "ref": "r", "input": {"a": 1}}, "metadata": {"resumed": {"ok": true}}})
        );
        let bare = paused.restart(None).unwrap();
        assert_eq!(bare.meta(metadata::RESUMED), Some(&json!(true)));
        let replaced = paused.restart_with_input(json!({"a": 2}), None).unwrap();
        assert_eq!(replaced.meta(metadata::REPLACED_INPUT), Some(&json!({"a": 1})));
        assert_eq!(replaced.as_tool_request().unwrap().input, Some(json!({"a": 2})));
        let respond = paused.respond(json!("out")).unwrap();
        assert_eq!(
            serde_json::to_value(&respond).unwrap(),
            json!({"toolResponse": {"name": "t", "ref": "r", "output": "out"}, "metadata": {"interruptResponse": true}})
        );
        assert!(paused.restart(Some(json!("not an object"))).is_err());
        assert!(Part::text("x").respond(json!(1)).is_err());
    }

    #[test]
    fn interrupt_as_decodes_data() {
        #[derive(Deserialize)]
        struct Ask {
            why: String,
        }
        let mut p = Part::tool_request("t", None, None);
        assert!(matches!(
            p.interrupt_as::<Ask>(),
            Err(InterruptAsError::NotAnInterrupt { .. })
        ));
        p.set_meta(metadata::INTERRUPT, json!({"why": "ask"}));
        assert_eq!(p.interrupt_as::<Ask>().unwrap().why, "ask");
        p.set_meta(metadata::RESOLVED_INTERRUPT, json!(true));
        p.remove_meta(metadata::INTERRUPT);
        assert!(matches!(
            p.interrupt_as::<Ask>(),
            Err(InterruptAsError::NotAnInterrupt { .. })
        ));
    }
}
