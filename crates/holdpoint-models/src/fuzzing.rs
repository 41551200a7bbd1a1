//! Entry points for fuzzing the providers' stream decoders, which are
//! otherwise private: bytes in, the decoded response or the error a
//! provider call would return out. Not a stable API (hidden from the docs);
//! `fuzz/fuzz_targets/provider_stream.rs` drives it.

use std::sync::OnceLock;

use holdpoint::model::{ChunkSink, GenerateResponse};
use holdpoint::{Error, Result, Status};

use crate::http::{HttpClient, HttpOptions};

/// Whose server-sent-event stream the bytes are read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// OpenAI Chat Completions chunks (`data: {…}` … `data: [DONE]`).
    OpenAi,
    /// Anthropic Messages events (`message_start` … `message_stop`).
    Anthropic,
    /// Gemini `streamGenerateContent?alt=sse` responses.
    Gemini,
}

impl StreamFormat {
    /// Every format, in a fixed order.
    pub const ALL: [StreamFormat; 3] = [StreamFormat::OpenAi, StreamFormat::Anthropic, StreamFormat::Gemini];

    /// The format a fuzz input's selector byte names.
    pub fn from_byte(b: u8) -> StreamFormat {
        Self::ALL[usize::from(b) % Self::ALL.len()]
    }

    fn provider(self) -> &'static str {
        match self {
            StreamFormat::OpenAi => "openai",
            StreamFormat::Anthropic => "anthropic",
            StreamFormat::Gemini => "googleai",
        }
    }
}

/// One client per format, built once (building a TLS client is slow).
fn client(format: StreamFormat) -> Result<HttpClient> {
    static CLIENTS: OnceLock<Vec<Option<HttpClient>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(|| {
        StreamFormat::ALL
            .iter()
            .map(|f| HttpClient::new(f.provider(), &HttpOptions::default(), Vec::new(), None).ok())
            .collect()
    });
    let index = StreamFormat::ALL.iter().position(|f| *f == format).unwrap_or(0);
    clients
        .get(index)
        .cloned()
        .flatten()
        .ok_or_else(|| Error::with_status(Status::Internal, "no HTTP client for the fuzzing entry"))
}

/// Decodes `body` as a streaming response body in `format`, delivered in
/// pieces of `piece` bytes (0: all at once) so event boundaries fall
/// anywhere. Returns what the provider's `generate` would: the assembled
/// response, or an error. Any input must end in one of the two, never a
/// panic.
pub async fn decode_stream(format: StreamFormat, body: &[u8], piece: usize) -> Result<GenerateResponse> {
    let http = client(format)?;
    let pieces: Vec<std::result::Result<Vec<u8>, std::io::Error>> = if piece == 0 || body.is_empty() {
        vec![Ok(body.to_vec())]
    } else {
        body.chunks(piece).map(|c| Ok(c.to_vec())).collect()
    };
    let response = reqwest::Response::from(http::Response::new(reqwest::Body::wrap_stream(futures::stream::iter(
        pieces,
    ))));
    let chunks = ChunkSink::none();
    match format {
        #[cfg(feature = "openai")]
        StreamFormat::OpenAi => crate::openai::stream::read(response, &http, &chunks).await,
        #[cfg(feature = "anthropic")]
        StreamFormat::Anthropic => crate::anthropic::stream::read(response, &http, &chunks).await,
        #[cfg(feature = "gemini")]
        StreamFormat::Gemini => crate::gemini::stream::read(response, &http, &chunks).await,
        #[cfg(not(all(feature = "gemini", feature = "openai", feature = "anthropic")))]
        _ => Err(Error::with_status(
            Status::FailedPrecondition,
            format!("the {} provider is not compiled in", format.provider()),
        )),
    }
}

/// [`decode_stream`] on a fresh current-thread runtime, for fuzz targets.
pub fn decode_stream_blocking(format: StreamFormat, body: &[u8], piece: usize) -> Result<GenerateResponse> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::with_status(Status::Internal, format!("no runtime: {e}")))?;
    runtime.block_on(decode_stream(format, body, piece))
}

#[cfg(all(test, feature = "gemini", feature = "openai", feature = "anthropic"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use holdpoint::FinishReason;

    const OPENAI_OK: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    const ANTHROPIC_OK: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    );
    const GEMINI_OK: &str = concat!(
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]},\"index\":0}]}\n\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"
    );

    fn ok_body(format: StreamFormat) -> &'static str {
        match format {
            StreamFormat::OpenAi => OPENAI_OK,
            StreamFormat::Anthropic => ANTHROPIC_OK,
            StreamFormat::Gemini => GEMINI_OK,
        }
    }

    #[tokio::test]
    async fn well_formed_streams_decode_in_any_piece_size() {
        for format in StreamFormat::ALL {
            for piece in [0, 1, 7, 64] {
                let out = decode_stream(format, ok_body(format).as_bytes(), piece)
                    .await
                    .unwrap_or_else(|e| panic!("{format:?} in pieces of {piece}: {e}"));
                assert_eq!(out.text(), "Hello", "{format:?}");
                assert_eq!(out.finish_reason, Some(FinishReason::Stop), "{format:?}");
            }
        }
    }

    #[tokio::test]
    async fn text_split_inside_a_utf8_character_decodes() {
        let body = OPENAI_OK.replace("Hel", "Hé€");
        for piece in [1, 2, 3] {
            let out = decode_stream(StreamFormat::OpenAi, body.as_bytes(), piece)
                .await
                .unwrap();
            assert_eq!(out.text(), "Hé€lo");
        }
    }

    #[tokio::test]
    async fn malformed_frames_are_errors_not_panics() {
        let common: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"data: {not json\n\n".to_vec(),
            b"data: \xff\xfe\n\n".to_vec(),
            b"data: [\n\n".to_vec(),
            b"data: null\n\n".to_vec(),
            b"data: 12345678901234567890123\n\n".to_vec(),
            b"event: \n\ndata:\n\n:comment only\n\n".to_vec(),
        ];
        let specific: Vec<(StreamFormat, &str)> = vec![
            // A tool call whose arguments never become JSON, then done.
            (
                StreamFormat::OpenAi,
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"t\",\"arguments\":\"{\\\"a\\\":\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
            ),
            // A tool call index far beyond any started call.
            (
                StreamFormat::OpenAi,
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":4294967295,\"function\":{\"arguments\":\"x\"}}]},\"finish_reason\":null}]}\n\n",
            ),
            (
                StreamFormat::OpenAi,
                "data: {\"error\":{\"code\":99999,\"message\":\"boom\"}}\n\n",
            ),
            // A delta for a block that never started.
            (
                StreamFormat::Anthropic,
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":18446744073709551615,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ),
            // Tool input JSON that never closes.
            (
                StreamFormat::Anthropic,
                "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ),
            (
                StreamFormat::Anthropic,
                "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
            ),
            (
                StreamFormat::Gemini,
                "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":7}}]}}]}\n\n",
            ),
            (
                StreamFormat::Gemini,
                "data: {\"error\":{\"code\":70000,\"message\":\"boom\"}}\n\n",
            ),
            (StreamFormat::Gemini, "data: {\"candidates\":[]}\n\n"),
        ];
        let mut cases: Vec<(StreamFormat, Vec<u8>)> = Vec::new();
        for format in StreamFormat::ALL {
            cases.extend(common.iter().map(|b| (format, b.clone())));
            // A good stream cut off half way.
            let ok = ok_body(format).as_bytes();
            cases.push((format, ok[..ok.len() / 2].to_vec()));
        }
        cases.extend(specific.into_iter().map(|(f, b)| (f, b.as_bytes().to_vec())));
        for (format, body) in cases {
            for piece in [0, 3] {
                let got = decode_stream(format, &body, piece).await;
                let err = got.expect_err(&format!("{format:?} accepted {:?}", String::from_utf8_lossy(&body)));
                assert!(
                    matches!(
                        err.status(),
                        Status::Internal | Status::Unavailable | Status::InvalidArgument
                    ),
                    "{format:?} {:?}: {err} ({:?})",
                    String::from_utf8_lossy(&body),
                    err.status()
                );
            }
        }
    }

    #[test]
    fn the_blocking_entry_runs_its_own_runtime() {
        let out = decode_stream_blocking(StreamFormat::from_byte(0), OPENAI_OK.as_bytes(), 5).unwrap();
        assert_eq!(out.text(), "Hello");
        assert_eq!(StreamFormat::from_byte(4), StreamFormat::Anthropic);
    }
}
