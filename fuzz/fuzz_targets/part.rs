//! `Part` from JSON (docs/reference.md §2): decoding never panics, round trips, and the
//! directives built from a decoded part (restart, restart with input,
//! respond) decode again.
#![no_main]

use holdpoint::Part;
use holdpoint::message::metadata;
use holdpoint_fuzz::{check_round_trip, round_trip};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Part::from_json(text);
    }
    let Some(part) = round_trip::<Part>(data) else { return };
    if let Some(meta) = &part.metadata {
        metadata::validate(meta).expect("a decoded part has valid markers");
    }
    let _ = part.is_interrupt();
    let _ = part.interrupt_data();
    let _ = part.expires_at();
    let _ = part.interrupted_by();
    let _ = part.interrupt_as::<Value>();
    let _ = part.as_text();
    let data_for_resume = part.meta("resumed").cloned();
    for built in [
        part.restart(None),
        part.restart(data_for_resume),
        part.restart(Some(json!({"toolApproved": true}))),
        part.restart_with_input(json!({"changed": true}), None),
        part.respond(json!({"answer": 42})),
    ]
    .into_iter()
    .flatten()
    {
        check_round_trip(&built);
    }
});
