//! Decoding arbitrary JSON never panics: every wire type either decodes or
//! reports a serde error, and what decodes re-encodes to a value that
//! decodes to the same thing.

use std::fmt::Debug;

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::session::{JsonStateCodec, SessionState, Snapshot, StateCodec};
use holdpoint::{GenerateChunk, GenerateResponse, Message, Part, Resume, Status};
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::strategies;

fn decodes_stably<T>(value: &Value) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    if let Ok(decoded) = serde_json::from_value::<T>(value.clone()) {
        let again: T = serde_json::from_value(serde_json::to_value(&decoded).unwrap())
            .map_err(|e| TestCaseError::fail(format!("re-encoded value does not decode: {e}")))?;
        prop_assert_eq!(again, decoded);
    }
    let _ = serde_json::from_str::<T>(&value.to_string());
    Ok(())
}

fn all_types(value: &Value) -> Result<(), TestCaseError> {
    decodes_stably::<Part>(value)?;
    decodes_stably::<Message>(value)?;
    decodes_stably::<Resume>(value)?;
    decodes_stably::<AgentInput>(value)?;
    decodes_stably::<AgentInit>(value)?;
    decodes_stably::<SessionState>(value)?;
    decodes_stably::<Snapshot>(value)?;
    decodes_stably::<GenerateResponse>(value)?;
    decodes_stably::<GenerateChunk>(value)?;
    if let Err(e) = JsonStateCodec.decode(value.clone()) {
        prop_assert_eq!(e.status(), Status::InvalidArgument);
    }
    Ok(())
}

/// JSON shaped like the wire types, with values of any kind in their
/// fields, so decoding gets past the first key.
fn wire_shaped() -> impl Strategy<Value = Value> {
    let j = strategies::json;
    prop_oneof![
        j(),
        (j(), j()).prop_map(|(a, b)| json!({"text": a, "metadata": b})),
        (j(), j(), j())
            .prop_map(|(n, r, m)| json!({"toolRequest": {"name": n, "ref": r}, "metadata": {"interrupt": m}})),
        (j(), j()).prop_map(
            |(o, m)| json!({"toolResponse": {"name": "t", "output": o}, "metadata": {"interruptResponse": m}})
        ),
        (j(), j()).prop_map(|(role, c)| json!({"role": role, "content": [c]})),
        (j(), j()).prop_map(|(r, d)| json!({"resume": {"restart": [r]}, "detach": d})),
        (j(), j()).prop_map(|(s, m)| json!({"sessionId": s, "messages": [m], "custom": {}})),
        (j(), j()).prop_map(|(t, s)| json!({"sessionId": "s", "createdAt": t, "updatedAt": t, "status": s})),
        (j(), j())
            .prop_map(|(u, f)| json!({"message": {"role": "model", "content": []}, "usage": u, "finishReason": f})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn decoding_arbitrary_json_never_panics(value in wire_shaped()) {
        all_types(&value)?;
    }

    /// Generated valid values with one field replaced by an arbitrary
    /// value still decode or fail cleanly.
    #[test]
    fn decoding_damaged_values_never_panics(state in strategies::session_state(), junk in strategies::json(), at in 0usize..8) {
        let mut value = serde_json::to_value(&state).unwrap();
        let keys = ["sessionId", "messages", "artifacts", "custom", "role", "content", "parts", "metadata"];
        let key = keys[at];
        if let Some(obj) = value.as_object_mut() {
            obj.insert(key.to_owned(), junk.clone());
        }
        if let Some(first) = value.get_mut("messages").and_then(|m| m.get_mut(0)).and_then(Value::as_object_mut) {
            first.insert(key.to_owned(), junk);
        }
        all_types(&value)?;
    }
}
