//! The request bodies of `holdpoint-server` (docs/reference.md §12): `{"data", "init"}`
//! for runs, getSnapshot and abort requests, and the first WebSocket
//! message, through the server's own decoder (`envelope::decode_json`).
//! Decoding never panics; every refusal is INVALID_ARGUMENT (HTTP 400) with
//! a message; a decoded run request's input validates to a typed answer.
#![no_main]

use holdpoint::Status;
use holdpoint_server::envelope::{AbortRequest, ConnectInit, RunRequest, SnapshotRequest, decode_json};
use holdpoint_server::error::ApiError;
use libfuzzer_sys::fuzz_target;

fn refused(e: &ApiError) {
    assert_eq!(e.status(), Status::InvalidArgument, "{}", e.message());
    assert_eq!(e.http_status().as_u16(), 400);
    assert!(!e.message().is_empty());
}

fuzz_target!(|data: &[u8]| {
    match decode_json::<RunRequest>(data) {
        Ok(run) => {
            if let Err(e) = run.data.validate() {
                assert_eq!(e.status(), Status::InvalidArgument, "{e}");
            }
        }
        Err(e) => refused(&e),
    }
    if let Err(e) = decode_json::<SnapshotRequest>(data) {
        refused(&e);
    }
    if let Err(e) = decode_json::<AbortRequest>(data) {
        refused(&e);
    }
    if let Err(e) = decode_json::<ConnectInit>(data) {
        refused(&e);
    }
});
