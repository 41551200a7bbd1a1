//! Assembling a streamed Messages API answer. Events: `message_start`,
//! then per content block `content_block_start`, `content_block_delta`s
//! (`text_delta`, `input_json_delta`, `thinking_delta`, `signature_delta`)
//! and `content_block_stop`, then `message_delta` (stop reason, output
//! tokens) and `message_stop`; `ping`s anywhere, `error` on failure.
//! Text and thinking deltas are streamed as chunks; a tool call's
//! `partial_json` pieces are joined and parsed once its stream is complete.
//! Ending before `message_stop` is an `INTERNAL` error.

use holdpoint::model::{ChunkSink, GenerateChunk, GenerateResponse};
use holdpoint::{Message, Part, PartKind, Result, Role, Status};
use reqwest::Response;
use serde_json::{Map, Value};

use super::convert;
use super::wire::{BlockDelta, ResponseBlock, StreamEvent, WireError, WireUsage};
use crate::content::parse_arguments;
use crate::http::HttpClient;
use crate::sse::EventReader;

enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        initial: Value,
        json: String,
    },
    Thinking {
        text: String,
        signature: String,
    },
    Other,
}

#[derive(Default)]
struct Assembly {
    blocks: Vec<(usize, Block)>,
    stop_reason: Option<String>,
    usage: WireUsage,
}

impl Assembly {
    fn block(&mut self, http: &HttpClient, index: usize) -> Result<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
            .ok_or_else(|| {
                http.error(
                    Status::Internal,
                    format!("a delta for content block {index}, which never started"),
                )
            })
    }

    fn merge_usage(&mut self, u: WireUsage) {
        let mine = &mut self.usage;
        mine.input_tokens = u.input_tokens.or(mine.input_tokens);
        mine.output_tokens = u.output_tokens.or(mine.output_tokens);
        mine.cache_creation_input_tokens = u.cache_creation_input_tokens.or(mine.cache_creation_input_tokens);
        mine.cache_read_input_tokens = u.cache_read_input_tokens.or(mine.cache_read_input_tokens);
    }

    fn delta(&mut self, http: &HttpClient, index: usize, delta: BlockDelta) -> Result<Option<Part>> {
        let block = self.block(http, index)?;
        Ok(match (block, delta) {
            (Block::Text(text), BlockDelta::TextDelta { text: d }) => {
                text.push_str(&d);
                (!d.is_empty()).then(|| Part::text(d))
            }
            (Block::ToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
                None
            }
            (Block::Thinking { text, .. }, BlockDelta::ThinkingDelta { thinking }) => {
                text.push_str(&thinking);
                (!thinking.is_empty()).then(|| Part::from_kind(PartKind::Reasoning(thinking)))
            }
            (Block::Thinking { signature, .. }, BlockDelta::SignatureDelta { signature: s }) => {
                signature.push_str(&s);
                None
            }
            (_, BlockDelta::Other) | (Block::Other, _) => None,
            (_, d) => {
                return Err(http.error(
                    Status::Internal,
                    format!("content block {index} got a delta of the wrong kind ({d:?})"),
                ));
            }
        })
    }

    fn into_parts(self, http: &HttpClient) -> Result<Vec<Part>> {
        let mut parts = Vec::new();
        for (_, block) in self.blocks {
            match block {
                Block::Text(t) => parts.push(Part::text(t)),
                Block::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                } => {
                    let input = if json.trim().is_empty() && initial.is_object() {
                        initial
                    } else {
                        parse_arguments(http, &name, &json)?
                    };
                    parts.push(Part::tool_request(name, Some(id), Some(input)));
                }
                Block::Thinking { text, signature } => parts.push(convert::reasoning(text, signature)),
                Block::Other => {}
            }
        }
        Ok(parts)
    }
}

fn stream_error(http: &HttpClient, err: WireError) -> holdpoint::Error {
    let status = match err.kind.as_str() {
        "overloaded_error" | "api_error" => Status::Unavailable,
        "rate_limit_error" => Status::ResourceExhausted,
        "authentication_error" => Status::Unauthenticated,
        "permission_error" => Status::PermissionDenied,
        "not_found_error" => Status::NotFound,
        "invalid_request_error" | "request_too_large" => Status::InvalidArgument,
        _ => Status::Internal,
    };
    http.error(status, format!("stream failed: {} ({})", err.message, err.kind))
}

/// Reads the stream to its end, streaming text to `chunks`.
pub(crate) async fn read(resp: Response, http: &HttpClient, chunks: &ChunkSink) -> Result<GenerateResponse> {
    let mut events = EventReader::new(resp, http);
    let mut assembly = Assembly::default();
    let mut stopped = false;
    while let Some(event) = events.next().await? {
        if event.data.trim().is_empty() {
            continue;
        }
        let streamed = match events.decode::<StreamEvent>(&event)? {
            StreamEvent::MessageStart { message } => {
                if let Some(u) = message.usage {
                    assembly.merge_usage(u);
                }
                None
            }
            StreamEvent::ContentBlockStart { index, content_block } => {
                let (block, first) = match content_block {
                    ResponseBlock::Text { text } => {
                        (Block::Text(text.clone()), (!text.is_empty()).then(|| Part::text(text)))
                    }
                    ResponseBlock::ToolUse { id, name, input } => (
                        Block::ToolUse {
                            id,
                            name,
                            initial: if input.is_null() {
                                Value::Object(Map::new())
                            } else {
                                input
                            },
                            json: String::new(),
                        },
                        None,
                    ),
                    ResponseBlock::Thinking { thinking, signature } => (
                        Block::Thinking {
                            text: thinking,
                            signature,
                        },
                        None,
                    ),
                    ResponseBlock::Other => (Block::Other, None),
                };
                assembly.blocks.push((index, block));
                first
            }
            StreamEvent::ContentBlockDelta { index, delta } => assembly.delta(http, index, delta)?,
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    assembly.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    assembly.merge_usage(u);
                }
                None
            }
            StreamEvent::MessageStop => {
                stopped = true;
                break;
            }
            StreamEvent::Error { error } => return Err(stream_error(http, error)),
            StreamEvent::ContentBlockStop { .. } | StreamEvent::Ping | StreamEvent::Other => None,
        };
        if let Some(part) = streamed {
            chunks.send(GenerateChunk::new(Role::Model, vec![part]));
        }
    }
    if !stopped {
        return Err(events.truncated("message_stop"));
    }
    let stop_reason = assembly.stop_reason.clone();
    let usage = convert::usage(Some(&assembly.usage));
    let parts = assembly.into_parts(http)?;
    let mut response = GenerateResponse::from_message(Message::new(Role::Model, parts));
    response.finish_reason = Some(convert::finish_reason(stop_reason.as_deref()));
    response.usage = usage;
    Ok(response)
}
