//! The wire form of a [`Part`]: one kind field plus `metadata`, decoded by
//! which fields are present; two kinds or none are rejected, a field
//! Holdpoint does not know is ignored and dropped (as Genkit's Go and JS
//! decoders do), a known one of the wrong type is rejected.

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::metadata::{self, Metadata};
use super::{Media, Part, PartKind, Resource, ToolRequest, ToolResponse};

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
#[serde(rename_all = "camelCase")]
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
