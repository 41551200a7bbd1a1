//! Resume validation against a history (docs/reference.md §5, §4.4), with arbitrary
//! histories and directives: `validate_resume` never panics and every
//! refusal is INVALID_ARGUMENT; directives it accepts then go through the
//! generate loop's resume (pending outputs, responds checked against the
//! output schema, restarts re-run, expiry), which ends in `Ok` or a typed
//! error.
//!
//! Input is either JSON `{"history": [Message], "resume": Resume}` (the
//! seed corpus uses it; only what the decoder accepts) or any other bytes,
//! read with `arbitrary` into a [`Case`] (metadata of every kind, set
//! without the decoder's checks, as a store could hold it).
#![no_main]

use std::sync::Arc;

use holdpoint::generate::validate_resume;
use holdpoint::middleware::ToolApproval;
use holdpoint::{GenerateOptions, Status, generate};
use holdpoint::{Message, Resume};
use holdpoint_fuzz::harness::{model, runtime, tools};
use holdpoint_fuzz::history::Case;
use libfuzzer_sys::arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonCase {
    history: Vec<Message>,
    #[serde(default)]
    resume: Resume,
    #[serde(default)]
    approval: bool,
}

fuzz_target!(|data: &[u8]| {
    let (history, resume, approval) = match serde_json::from_slice::<JsonCase>(data) {
        Ok(c) => (c.history, c.resume, c.approval),
        Err(_) => {
            let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
                return;
            };
            let history = case.history();
            let resume = case.resume(&history);
            (history, resume, case.approval)
        }
    };
    if let Err(e) = validate_resume(&history, &resume) {
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
        return;
    }
    let mut options = GenerateOptions::new(model(None))
        .messages(history)
        .tools(tools())
        .max_turns(3)
        .resume(resume);
    if approval {
        options.middleware.push(Arc::new(ToolApproval::allow(["echo", "fail"])));
    }
    runtime().block_on(async move {
        let _ = generate(options).await;
    });
});
