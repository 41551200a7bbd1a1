//! Shared pieces of the Holdpoint fuzz targets: the decode/round-trip check
//! every decoder target applies, a history generator for the structured
//! targets, and the agents, tools and models the run-time targets drive.
//!
//! Every target states one promise about input from outside: decoding never
//! panics, whatever decodes re-encodes to something that decodes to the same
//! value, and running what decoded ends in `Ok` or a typed error, never a
//! panic (an agent turn that panics is reported by the worker as INTERNAL
//! "the turn panicked"; the targets turn that back into a crash).
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod harness;
pub mod history;

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Decodes `data` as `T` (as JSON text, and again through a `Value`), and
/// when it decodes, checks the round trip: the re-encoded text decodes to an
/// equal value, both as text and as a `Value`.
pub fn round_trip<T>(data: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    // The `Value` route must not panic either (servers decode envelopes
    // into values first and the typed parts later).
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data)
        && let Ok(decoded) = serde_json::from_value::<T>(value)
    {
        check_round_trip(&decoded);
    }
    let decoded: T = serde_json::from_slice(data).ok()?;
    check_round_trip(&decoded);
    Some(decoded)
}

/// Asserts that `value` survives encoding and decoding unchanged.
pub fn check_round_trip<T>(value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = serde_json::to_string(value).expect("a decoded value encodes");
    let again: T = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("the encoding of a decoded value does not decode: {e}\n{text}"),
    };
    assert_eq!(*value, again, "the round trip changed the value; encoding: {text}");
    let as_value = serde_json::to_value(value).expect("a decoded value encodes as a Value");
    let again: T = match serde_json::from_value(as_value) {
        Ok(v) => v,
        Err(e) => panic!("the Value encoding of a decoded value does not decode: {e}\n{text}"),
    };
    assert_eq!(
        *value, again,
        "the Value round trip changed the value; encoding: {text}"
    );
}

/// Fails the fuzz run when an agent reports a caught panic as an error.
pub fn assert_no_caught_panic(error: &holdpoint::Error) {
    let text = error.to_string();
    assert!(!text.contains("panicked"), "a turn panicked: {text}");
}
