//! `Message` from JSON: decoding never panics and round trips.
#![no_main]

use holdpoint::Message;
use holdpoint_fuzz::round_trip;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Message::from_json(text);
    }
    let Some(message) = round_trip::<Message>(data) else {
        return;
    };
    let _ = message.text();
    let paused = message.interrupts().count();
    assert!(paused <= message.tool_requests().count());
});
