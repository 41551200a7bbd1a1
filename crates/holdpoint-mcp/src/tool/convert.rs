//! A `CallToolResult` as a Holdpoint tool outcome.

use holdpoint::message::{Media, Part, PartKind, Resource};
use holdpoint::tool::ToolOutcome;
use serde_json::Value;

/// A `CallToolResult` as an outcome: `structuredContent` (else the text
/// blocks joined by newlines) is the output; images and audio become media
/// parts (data URLs), resource links resource parts, embedded resources
/// and anything else data parts. `isError` is a soft failure with the text.
pub(super) fn convert(tool: &str, result: &Value) -> ToolOutcome {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut texts = Vec::new();
    let mut parts = Vec::new();
    for b in &blocks {
        let s = |k: &str| b.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => texts.push(s("text").unwrap_or_default().to_owned()),
            Some("image") | Some("audio") => {
                let mime = s("mimeType").unwrap_or("application/octet-stream");
                parts.push(Part::from_kind(PartKind::Media(Media {
                    content_type: Some(mime.to_owned()),
                    url: format!("data:{mime};base64,{}", s("data").unwrap_or_default()),
                })));
            }
            Some("resource_link") => match s("uri") {
                Some(uri) => parts.push(Part::from_kind(PartKind::Resource(Resource { uri: uri.to_owned() }))),
                None => parts.push(Part::data(b.clone())),
            },
            Some("resource") => parts.push(Part::data(b.get("resource").cloned().unwrap_or(Value::Null))),
            _ => parts.push(Part::data(b.clone())),
        }
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = if texts.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            texts.join("\n")
        };
        return ToolOutcome::Failed(format!("tool \"{tool}\": {text}"));
    }
    let output = match result.get("structuredContent").filter(|v| !v.is_null()) {
        Some(v) => v.clone(),
        None if !texts.is_empty() => Value::String(texts.join("\n")),
        None => Value::Null,
    };
    ToolOutcome::Output { output, content: parts }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_become_output_and_parts() {
        let r = json!({"content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"},
            {"type": "image", "data": "AAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "test://x", "name": "x"}
        ]});
        let ToolOutcome::Output { output, content } = convert("t", &r) else {
            panic!("not output")
        };
        assert_eq!(output, json!("a\nb"));
        assert_eq!(content.len(), 2);
        assert!(matches!(&content[0].kind, PartKind::Media(m) if m.url == "data:image/png;base64,AAA"));
        assert!(matches!(&content[1].kind, PartKind::Resource(r) if r.uri == "test://x"));
        let s = json!({"content": [{"type": "text", "text": "{}"}], "structuredContent": {"n": 1}});
        assert!(matches!(convert("t", &s), ToolOutcome::Output { output, .. } if output == json!({"n": 1})));
        let e = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        assert_eq!(convert("t", &e), ToolOutcome::Failed("tool \"t\": boom".into()));
    }
}
