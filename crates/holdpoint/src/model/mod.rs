//! The `Model` trait and the request, response and chunk types of a model call.

mod scripted;
mod types;

use std::sync::Arc;

use async_trait::async_trait;

pub use scripted::{ScriptedModel, ScriptedTurn};
pub use types::{FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, OutputFormat, ToolDefinition, Usage};

use crate::error::Result;

/// Where a model sends the chunks it streams. Cheap to clone; a sink that
/// nobody listens to drops chunks.
#[derive(Clone, Default)]
pub struct ChunkSink {
    inner: Option<Arc<dyn Fn(GenerateChunk) + Send + Sync>>,
}

impl ChunkSink {
    /// A sink that calls `f` for every chunk.
    pub fn new(f: impl Fn(GenerateChunk) + Send + Sync + 'static) -> Self {
        ChunkSink {
            inner: Some(Arc::new(f)),
        }
    }

    /// A sink that drops everything.
    pub fn none() -> Self {
        ChunkSink::default()
    }

    /// Whether anybody listens (models may skip streaming when not).
    pub fn is_listening(&self) -> bool {
        self.inner.is_some()
    }

    /// Sends one chunk.
    pub fn send(&self, chunk: GenerateChunk) {
        if let Some(f) = &self.inner {
            f(chunk);
        }
    }
}

impl std::fmt::Debug for ChunkSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkSink")
            .field("listening", &self.is_listening())
            .finish()
    }
}

/// A language model: a request in, chunks streamed to a sink, a final
/// response out.
///
/// Cancellation is Rust's: dropping the future stops the call (adapters
/// abort their HTTP request when dropped).
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's name, e.g. `googleai/gemini-flash-latest`.
    fn name(&self) -> &str;

    /// Runs one model call, streaming chunks to `chunks` before returning
    /// the full response.
    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse>;
}
