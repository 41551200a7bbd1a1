//! Resume directives from JSON (`{"restart": [...], "respond": [...]}`, or a
//! bare list of parts sorted by kind): decoding never panics, round trips,
//! and validation against a paused history gives a typed answer.
#![no_main]

use holdpoint::generate::validate_resume;
use holdpoint::{Part, Resume, Status};
use holdpoint_fuzz::harness::paused_history;
use holdpoint_fuzz::{check_round_trip, round_trip};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let history = paused_history();
    let resume = match round_trip::<Resume>(data) {
        Some(r) => r,
        None => match serde_json::from_slice::<Vec<Part>>(data) {
            Ok(parts) => Resume::from_parts(parts),
            Err(_) => return,
        },
    };
    check_round_trip(&resume);
    if let Err(e) = validate_resume(&history, &resume) {
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    }
    let _ = validate_resume(&[], &resume);
    let _ = validate_resume(&history[..1], &resume);
});
