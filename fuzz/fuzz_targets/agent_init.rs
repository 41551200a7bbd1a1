//! `AgentInit` from JSON (the `init` of `POST /agents/{name}`): decoding
//! never panics and round trips; its client-held `state` goes through the
//! default codec and the session id check.
#![no_main]

use holdpoint::agent::AgentInit;
use holdpoint::session::{JsonStateCodec, StateCodec, check_session_id};
use holdpoint_fuzz::{check_round_trip, round_trip};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(init) = round_trip::<AgentInit>(data) else {
        return;
    };
    if let Some(id) = &init.session_id {
        let _ = check_session_id(id);
    }
    if let Some(state) = init.state
        && let Ok(state) = JsonStateCodec.decode(state)
    {
        check_round_trip(&state);
        let _ = check_session_id(&state.session_id);
    }
});
