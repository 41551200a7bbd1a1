//! The model providers' stream decoders (`holdpoint-models`: OpenAI,
//! Anthropic and Gemini server-sent events), through their fuzzing entry.
//! The first byte picks the provider, the second the size of the pieces
//! the body arrives in (0: all at once), the rest is the body. Decoding
//! ends in a response or a typed error, never a panic; a response's text
//! is the same whatever the piece size.
#![no_main]

use holdpoint_models::fuzzing::{StreamFormat, decode_stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [selector, piece, body @ ..] = data else {
        return;
    };
    let format = StreamFormat::from_byte(*selector);
    let piece = usize::from(*piece % 32);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let (pieces, whole) = runtime.block_on(async {
        (
            decode_stream(format, body, piece).await,
            decode_stream(format, body, 0).await,
        )
    });
    match (pieces, whole) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.text(), b.text(), "the piece size changed the text");
            assert_eq!(a.finish_reason, b.finish_reason);
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.status(), b.status(), "the piece size changed the error: {a} / {b}");
        }
        (a, b) => panic!("the piece size changed the outcome: {a:?} / {b:?}"),
    }
});
