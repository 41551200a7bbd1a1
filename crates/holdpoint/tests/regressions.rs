//! Regressions found by the fuzz targets (`fuzz/`) and the property tests
//! (`tests/props/`): each test is the smallest input that once broke a
//! promise, named for the promise.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use holdpoint::session::{JsonStateCodec, SessionState, StateCodec};
use holdpoint::{Message, Part, PartKind, Role};
use serde_json::{Value, json};

/// proptest `parts_round_trip`: `Part::data(null)` encoded as
/// `{"data":null}`, which decoding refused ("a part needs one of …"), so a
/// tool that attached such a part left a session whose state could not be
/// read back. Parts are told apart by field presence, and a present `null`
/// is a value.
#[test]
fn null_data_and_custom_parts_round_trip() {
    for part in [Part::data(Value::Null), Part::from_kind(PartKind::Custom(Value::Null))] {
        let text = serde_json::to_string(&part).unwrap();
        assert_eq!(serde_json::from_str::<Part>(&text).unwrap(), part, "{text}");
    }
    assert_eq!(
        Part::from_json(r#"{"data":null}"#).unwrap().kind,
        PartKind::Data(Value::Null)
    );
}

/// The same, one level up: a session state holding such a part survives
/// the client-held-state codec.
#[test]
fn state_with_null_data_part_comes_back() {
    let mut state = SessionState::new("s1");
    state
        .messages
        .push(Message::new(Role::User, vec![Part::data(Value::Null)]));
    let encoded = JsonStateCodec.encode(&state).unwrap();
    assert_eq!(JsonStateCodec.decode(encoded).unwrap(), state);
}

/// Field presence also means a present `null` counts as a second kind.
#[test]
fn null_data_next_to_text_is_two_kinds() {
    let err = Part::from_json(r#"{"text":"a","data":null}"#).unwrap_err();
    assert!(err.to_string().contains("text, data"), "{err}");
    assert!(Part::from_json(r#"{"text":null}"#).is_err());
    assert!(serde_json::from_value::<Part>(json!({"custom": null, "metadata": {}})).is_ok());
}

/// Model output is untrusted: token counts near `u64::MAX` from two model
/// calls of one generation overflowed the usage sum (a panic in debug
/// builds, a wrapped total in release builds). Sums saturate.
#[tokio::test]
async fn huge_token_counts_saturate() {
    use std::sync::Arc;

    use holdpoint::{GenerateOptions, GenerateResponse, ScriptedModel, ScriptedTurn, Usage, generate, tool};

    let echo = tool("echo", "echoes", |_ctx, v: serde_json::Value| async move { Ok(v) });
    let huge = Usage {
        input_tokens: Some(u64::MAX),
        output_tokens: Some(u64::MAX - 1),
        total_tokens: Some(u64::MAX),
        ..Usage::default()
    };
    let model = ScriptedModel::new("m");
    let mut call = GenerateResponse::from_message(Message::new(
        Role::Model,
        vec![Part::tool_request("echo", None, Some(json!({})))],
    ));
    call.usage = huge.clone();
    let mut done = GenerateResponse::from_message(Message::model_text("ok"));
    done.usage = huge;
    model.push(ScriptedTurn::response(call));
    model.push(ScriptedTurn::response(done));
    let out = generate(
        GenerateOptions::new(Arc::new(model))
            .messages(vec![Message::user_text("hi")])
            .tools(vec![Arc::new(echo)]),
    )
    .await
    .unwrap();
    assert_eq!(out.response.usage.input_tokens, Some(u64::MAX));
    assert_eq!(out.response.usage.output_tokens, Some(u64::MAX));
}
