//! `SessionState`, the client-held state of client-managed agents (it
//! comes back in `init.state`): decoding through the default codec never
//! panics and round trips; the custom-state patches streamed for it, when
//! applied by a client, rebuild the new state exactly.
#![no_main]

use holdpoint::session::patch::PatchTracker;
use holdpoint::session::{JsonStateCodec, SessionState, StateCodec, check_session_id};
use holdpoint_fuzz::{check_round_trip, round_trip};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn apply(doc: &mut Value, ops: Value) {
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("a tracker patch decodes as RFC 6902");
    json_patch::patch(doc, &patch).expect("a tracker patch applies to the state it was made from");
}

fuzz_target!(|data: &[u8]| {
    let _ = round_trip::<SessionState>(data);
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(state) = JsonStateCodec.decode(value) else {
        return;
    };
    check_round_trip(&state);
    let encoded = JsonStateCodec.encode(&state).expect("a decoded state encodes");
    assert_eq!(JsonStateCodec.decode(encoded).expect("an encoded state decodes"), state);
    let _ = check_session_id(&state.session_id);

    // The custom state moves to `custom.next` (or to the artifacts, as a
    // value), then back: a client applying the patches follows along.
    let start = state.custom.clone();
    let next = start
        .get("next")
        .cloned()
        .unwrap_or_else(|| serde_json::to_value(&state.artifacts).expect("artifacts encode"));
    let mut tracker = PatchTracker::new(start.clone());
    let mut client = Value::Null;
    for target in [&next, &start, &next] {
        if let Some(ops) = tracker.change(target) {
            apply(&mut client, ops);
        }
        assert_eq!(&client, target, "patched client state differs");
    }
});
