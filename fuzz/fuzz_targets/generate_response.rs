//! What a model returns (`GenerateResponse`, streamed `GenerateChunk`s) and
//! what it is sent (`GenerateRequest`): decoding never panics and round
//! trips. A decoded response is then the answer of a model to every call
//! of a generation: the loop (refs, tool dispatch with argument
//! validation, interrupts, usage sums, max turns) ends in `Ok` or a typed
//! error, never a panic. Model output is untrusted input.
#![no_main]

use std::sync::Arc;

use holdpoint::model::ChunkSink;
use holdpoint::{
    GenerateChunk, GenerateOptions, GenerateRequest, GenerateResponse, Message, ScriptedModel, ScriptedTurn, generate,
};
use holdpoint_fuzz::harness::{runtime, tools};
use holdpoint_fuzz::round_trip;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = round_trip::<GenerateRequest>(data);
    let chunk = round_trip::<GenerateChunk>(data);
    let response = round_trip::<GenerateResponse>(data);
    if response.is_none() && chunk.is_none() {
        return;
    }
    let turn = match response {
        Some(r) => ScriptedTurn::response(r),
        None => ScriptedTurn::text("done"),
    };
    let turn = turn.with_chunks(chunk.into_iter().collect());
    let model = ScriptedModel::from_fn("fuzz", move |_req, _i| Some(turn.clone())).without_recording();
    let options = GenerateOptions::new(Arc::new(model))
        .messages(vec![Message::user_text("hi")])
        .tools(tools())
        .max_turns(3)
        .chunks(ChunkSink::new(|_chunk| {})); // a listening sink, so the streaming paths run
    runtime().block_on(async move {
        if let Ok(generation) = generate(options).await
            && generation.is_interrupted()
        {
            let last = generation
                .messages
                .last()
                .expect("an interrupted generation has a last message");
            assert!(last.interrupts().next().is_some(), "interrupted without a paused call");
        }
    });
});
