//! Signed client-held state (docs/reference.md §9): `holdpoint-server`'s
//! `SigningCodec`, which checks `init.state` before an agent sees it.
//! Verifying never panics and refuses with PERMISSION_DENIED (or
//! INVALID_ARGUMENT for a non-object). The fuzzer has no key, so whatever
//! it gets accepted must be one of the states signed below, up to the
//! number forms the signature deliberately allows (`500.0` as `500`); and
//! whatever decodes as a state signs and verifies back to itself, also
//! through text. Nothing it sends loads into another agent (the MAC covers
//! the agent's name).
//!
//! The seed corpus holds the states below as signed by this target's key:
//! `HOLDPOINT_FUZZ_PRINT_SEEDS=1 .../signed_state -runs=1` prints them.
#![no_main]

use std::sync::{Arc, LazyLock};

use holdpoint::Status;
use holdpoint::session::{JsonStateCodec, StateCodec};
use holdpoint_server::signing::{KeyRing, SIGNATURE, SigningCodec, SigningKey};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const STATES: &[&str] = &[
    r#"{"sessionId":"s1","messages":[{"role":"user","content":[{"text":"hello"}]}],"artifacts":[]}"#,
    r#"{"sessionId":"s2","messages":[{"role":"user","content":[{"text":"pay"}]},{"role":"model","content":[{"toolRequest":{"name":"ask","ref":"r1","input":{"amount":500.0,"to":"savings"}},"metadata":{"interrupt":{"question":"go on?"}}}]}],"artifacts":[{"name":"doc","parts":[{"text":"draft"}]}],"custom":{"balance":1250.5,"n":1,"big":1e300}}"#,
    r#"{"sessionId":"s3","messages":[],"artifacts":[],"custom":{"list":[1,2.0,-0.0,"x",null,true]}}"#,
];

struct Fixture {
    codec: SigningCodec,
    other_agent: SigningCodec,
    signed: Vec<Value>,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let ring = KeyRing::new(vec![
        SigningKey::new("fuzz-old", vec![1u8; 32]).expect("a valid key"),
        SigningKey::new("fuzz", vec![7u8; 32]).expect("a valid key"),
    ])
    .expect("a valid ring");
    let ring = Arc::new(ring);
    let codec = SigningCodec::scoped(Arc::clone(&ring), "fuzzAgent");
    let other_agent = SigningCodec::scoped(ring, "otherAgent");
    let signed: Vec<Value> = STATES
        .iter()
        .map(|s| {
            let state = JsonStateCodec
                .decode(serde_json::from_str(s).expect("seed JSON"))
                .expect("seed state");
            codec.encode(&state).expect("a state signs")
        })
        .collect();
    if std::env::var_os("HOLDPOINT_FUZZ_PRINT_SEEDS").is_some() {
        for s in &signed {
            eprintln!("{s}");
        }
    }
    Fixture {
        codec,
        other_agent,
        signed,
    }
});

/// The number forms the signature treats as one: an integral float in the
/// `u64`/`i64` range is the integer.
fn normalize(v: &Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) => {
                Value::from(f as u64)
            }
            Some(f) if n.is_f64() && f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..0.0).contains(&f) => {
                Value::from(f as i64)
            }
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect()),
        other => other.clone(),
    }
}

fn unsigned(mut v: Value) -> Value {
    if let Value::Object(map) = &mut v {
        map.remove(SIGNATURE);
    }
    normalize(&v)
}

fuzz_target!(|data: &[u8]| {
    let fx = &*FIXTURE;
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // State one agent signed never loads into another.
    assert!(
        fx.other_agent.decode(value.clone()).is_err(),
        "another agent's state accepted: {value}"
    );
    match fx.codec.decode(value.clone()) {
        Err(e) => assert!(
            matches!(e.status(), Status::PermissionDenied | Status::InvalidArgument),
            "unexpected refusal: {e}"
        ),
        Ok(state) => {
            let got = unsigned(value.clone());
            assert!(
                fx.signed.iter().any(|s| unsigned(s.clone()) == got),
                "accepted state the server never signed: {value}"
            );
            let again = fx.codec.encode(&state).expect("a state signs");
            assert_eq!(fx.codec.decode(again).expect("re-signed state verifies"), state);
        }
    }
    if let Ok(state) = JsonStateCodec.decode(value) {
        let signed = fx.codec.encode(&state).expect("a state signs");
        let text = serde_json::to_string(&signed).expect("signed state encodes");
        let back: Value = serde_json::from_str(&text).expect("signed text parses");
        assert_eq!(fx.codec.decode(back).expect("signed state verifies after text"), state);
    }
});
