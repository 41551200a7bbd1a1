//! Reading Holdpoint content the way every adapter needs it: the system
//! prompt, media `data:` URIs, tool outputs as text, and streamed tool
//! arguments as JSON.

#[cfg(any(feature = "gemini", feature = "anthropic"))]
use holdpoint::{Message, Role};
#[cfg(any(feature = "openai", feature = "anthropic"))]
use holdpoint::{Result, Status};
#[cfg(any(feature = "openai", feature = "anthropic"))]
use serde_json::Map;
use serde_json::Value;

#[cfg(any(feature = "openai", feature = "anthropic"))]
use crate::http::HttpClient;

/// The text of every `system` message, joined by blank lines (`None` when
/// there is no system text).
#[cfg(any(feature = "gemini", feature = "anthropic"))]
pub(crate) fn system_text(messages: &[Message]) -> Option<String> {
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// The MIME type and base64 payload of a `data:…;base64,…` URI.
#[cfg(any(feature = "gemini", feature = "anthropic"))]
pub(crate) fn parse_data_uri(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime.to_owned(), data.to_owned()))
}

/// A tool output as the text a provider's tool message carries: strings
/// as they are, anything else as JSON.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn output_text(output: Option<&Value>) -> String {
    match output {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The message of a soft failure: an output that is exactly
/// `{"error": "…"}`, as Holdpoint's generate loop writes it.
#[cfg(feature = "anthropic")]
pub(crate) fn soft_failure(output: Option<&Value>) -> Option<&str> {
    let obj = output?.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get("error")?.as_str()
}

/// Data-part content as text for providers with no structured-data part.
pub(crate) fn data_text(value: &Value) -> String {
    value.to_string()
}

/// Parses a tool call's assembled argument text: empty is `{}`; anything
/// that is not JSON is an `INTERNAL` error naming the tool.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn parse_arguments(http: &HttpClient, tool: &str, raw: &str) -> Result<Value> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(raw).map_err(|e| {
        http.error(
            Status::Internal,
            format!("the arguments of tool call \"{tool}\" are not valid JSON ({e})"),
        )
    })
}

#[cfg(all(test, any(feature = "gemini", feature = "anthropic")))]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "anthropic")]
    fn data_uris_and_outputs() {
        use serde_json::json;
        assert_eq!(
            parse_data_uri("data:image/png;base64,AAAA"),
            Some(("image/png".to_owned(), "AAAA".to_owned()))
        );
        assert_eq!(parse_data_uri("https://x/y.png"), None);
        assert_eq!(output_text(Some(&json!("hi"))), "hi");
        assert_eq!(output_text(Some(&json!({"a": 1}))), r#"{"a":1}"#);
        assert_eq!(soft_failure(Some(&json!({"error": "boom"}))), Some("boom"));
        assert_eq!(soft_failure(Some(&json!({"error": "boom", "x": 1}))), None);
    }

    #[test]
    #[cfg(any(feature = "gemini", feature = "anthropic"))]
    fn system_text_joins_system_messages() {
        let msgs = vec![
            Message::new(Role::System, vec![holdpoint::Part::text("be brief")]),
            Message::user_text("hi"),
        ];
        assert_eq!(system_text(&msgs).as_deref(), Some("be brief"));
        assert_eq!(system_text(&msgs[1..]), None);
    }
}
