//! `AgentInput` from JSON (the `data` of `POST /agents/{name}`): decoding
//! never panics, round trips, and validation gives a typed answer.
#![no_main]

use holdpoint::Status;
use holdpoint::agent::AgentInput;
use holdpoint_fuzz::round_trip;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(input) = round_trip::<AgentInput>(data) else {
        return;
    };
    match input.validate() {
        Ok(()) => assert!(input.has_payload() || input.is_detach()),
        Err(e) => assert_eq!(e.status(), Status::InvalidArgument, "{e}"),
    }
});
