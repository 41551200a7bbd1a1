//! [`LocalModel`]: the [`Model`] over the llama.cpp engine.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use holdpoint::model::ToolDefinition;
use holdpoint::model::{ChunkSink, FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, Model, Usage};
use holdpoint::{Error, Message, Part, Result, Role, Status};
use serde_json::json;

use crate::config::LocalConfig;
use crate::engine::{self, Job, Outcome};
use crate::grammar::{ToolMode, json_grammar, tool_grammar};
use crate::options::Options;
use crate::prompt::{self, Reply, parse_reply, partial_answer};

/// A GGUF model run in-process by llama.cpp, prompted with ChatML; see
/// the [crate docs](crate).
#[derive(Debug, Clone)]
pub struct LocalModel {
    name: String,
    path: PathBuf,
    config: LocalConfig,
}

impl LocalModel {
    /// `local/smollm2`: SmolLM2-135M-Instruct from the config's model
    /// directory. `FAILED_PRECONDITION`, saying how to fetch it, when the
    /// file is not there.
    pub fn smollm2(config: LocalConfig) -> Result<Self> {
        let path = config.smollm2_path();
        Self::from_file("local/smollm2", path, config)
    }

    /// A model named `name` from the GGUF file at `path` (a ChatML
    /// instruct model). `FAILED_PRECONDITION` when the file is missing.
    /// Nothing is loaded until the first call (or [`LocalModel::load`]).
    pub fn from_file(name: impl Into<String>, path: impl Into<PathBuf>, config: LocalConfig) -> Result<Self> {
        let path = path.into();
        if !path.is_file() {
            return Err(Error::with_status(
                Status::FailedPrecondition,
                format!(
                    "the local model file {} is missing: fetch it with `scripts/fetch-smollm2.sh` \
                     from the Holdpoint repository (set HOLDPOINT_MODEL_DIR to choose the directory)",
                    path.display()
                ),
            ));
        }
        Ok(LocalModel {
            name: name.into(),
            path,
            config,
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the model now (once per process and file) rather than on
    /// the first call; returns how long the load took.
    pub async fn load(&self) -> Result<Duration> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || engine::engine(&path).map(|e| e.load_time))
            .await
            .map_err(|e| Error::with_status(Status::Internal, format!("the local model thread failed: {e}")))?
    }
}

/// Sets the flag when dropped: the call's future went away (or ended).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How the reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Plain text, cut at stop sequences.
    Text,
    /// The tool format (`{"tool"…}` or `{"answer"…}`).
    Tools,
    /// JSON output.
    Json,
}

#[async_trait]
impl Model for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse> {
        let started = Instant::now();
        let Planned {
            job,
            shape,
            stops,
            tools,
        } = self.plan(&request)?;
        tracing::debug!(target: "holdpoint_models::local", model = %self.name, tools, ?shape, "generate");
        let (outcome, load_time) = self.run(job, shape, stops.clone(), chunks).await?;
        let mut response = response(shape, &outcome, &stops, load_time)?;
        response.latency_ms = Some(ms(started.elapsed()));
        Ok(response)
    }
}

/// What one request asks of the engine.
struct Planned {
    job: Job,
    shape: Shape,
    /// Stop sequences (plain text only).
    stops: Vec<String>,
    /// How many tools the model may call.
    tools: usize,
}

impl LocalModel {
    /// The engine job for `request`: its tools and mode, the grammar that
    /// holds the output to its shape, the prompt and the sampling options.
    fn plan(&self, request: &GenerateRequest) -> Result<Planned> {
        let config = Options::from_request(request)?;
        let output = request.output_format();
        let (tools, mode): (&[ToolDefinition], ToolMode) = match request.tool_choice.as_deref() {
            None | Some("auto") => (&request.tools, ToolMode::CallOrAnswer),
            Some("required") => (&request.tools, ToolMode::MustCall),
            Some("none") => (&[], ToolMode::CallOrAnswer),
            Some(other) => {
                return Err(Error::with_status(
                    Status::InvalidArgument,
                    format!("unknown tool choice \"{other}\" (auto, required or none)"),
                ));
            }
        };
        let after_results = request.messages.last().is_some_and(|m| m.role == Role::Tool);
        let mode = if mode == ToolMode::CallOrAnswer && after_results && self.config.answer_after_tool_results {
            ToolMode::MustAnswer
        } else {
            mode
        };
        let (shape, grammar) = if !tools.is_empty() {
            (Shape::Tools, Some(tool_grammar(tools, mode)))
        } else if output.json {
            (Shape::Json, Some(json_grammar(output.schema.as_ref())))
        } else {
            (Shape::Text, None)
        };
        let prompt = prompt::render(request, tools, output.json);
        let job = Job {
            prompt: prompt.segments,
            grammar,
            max_tokens: config
                .max_output_tokens
                .unwrap_or(self.config.default_max_tokens)
                .max(1),
            temperature: config.temperature.unwrap_or(0.0) as f32,
            top_p: config.top_p.map(|p| p as f32),
            top_k: config.top_k.and_then(|k| i32::try_from(k).ok()),
            // llama.cpp's default seed picks a random one.
            seed: config.seed.map(|s| s as u32).unwrap_or(u32::MAX),
            context_size: self.config.context_size,
            threads: self.config.threads.map_or_else(default_threads, |t| t.max(1) as i32),
        };
        let stops: Vec<String> = match shape {
            Shape::Text => config.stop_sequences.clone().unwrap_or_default(),
            _ => Vec::new(),
        };
        Ok(Planned {
            job,
            shape,
            stops,
            tools: tools.len(),
        })
    }

    /// Runs `job` on the engine's thread, streaming text to `chunks`;
    /// dropped, it cancels the job.
    async fn run(&self, job: Job, shape: Shape, stops: Vec<String>, chunks: ChunkSink) -> Result<(Outcome, Duration)> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(Arc::clone(&cancel));
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || -> Result<(Outcome, Duration)> {
            let engine = engine::engine(&path)?;
            let mut streamer = Streamer {
                chunks,
                shape,
                stops,
                sent: 0,
            };
            let outcome = engine.generate(&job, &cancel, |text| streamer.update(text))?;
            Ok((outcome, engine.load_time))
        })
        .await
        .map_err(|e| Error::with_status(Status::Internal, format!("the local model thread failed: {e}")))?
    }
}

/// The response of a finished job: its message, usage and timings.
fn response(shape: Shape, outcome: &Outcome, stops: &[String], load_time: Duration) -> Result<GenerateResponse> {
    let mut response = finish(shape, outcome, stops)?;
    let total = outcome.prompt_tokens + outcome.output_tokens;
    response.usage = Usage {
        input_tokens: Some(outcome.prompt_tokens),
        output_tokens: Some(outcome.output_tokens),
        total_tokens: Some(total),
        thoughts_tokens: None,
        cached_content_tokens: (outcome.cached_tokens > 0).then_some(outcome.cached_tokens),
    };
    let generate_s = outcome.generate_time.as_secs_f64();
    response.custom = json!({
        "local": {
            "loadMs": ms(load_time),
            "promptEvalMs": ms(outcome.prompt_time),
            "generateMs": ms(outcome.generate_time),
            "outputTokensPerSecond": if generate_s > 0.0 { outcome.output_tokens as f64 / generate_s } else { 0.0 },
        }
    });
    Ok(response)
}

/// Half the cores, at most 4, at least 1. A model this small gains little
/// from more threads, and llama.cpp's threads spin at every barrier, so
/// threads beyond the free cores stall generation rather than speed it
/// (BENCHMARKS.md, "The local model").
fn default_threads() -> i32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, 4) as i32
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sends text chunks as the reply grows.
struct Streamer {
    chunks: ChunkSink,
    shape: Shape,
    stops: Vec<String>,
    /// Bytes of the visible text already sent.
    sent: usize,
}

impl Streamer {
    fn update(&mut self, text: &str) -> ControlFlow<()> {
        let (visible, done) = match self.shape {
            Shape::Text => match stop_cut(text, &self.stops) {
                Some(cut) => (text[..cut].to_owned(), true),
                None => (text[..safe_len(text, &self.stops)].to_owned(), false),
            },
            Shape::Json => (text.to_owned(), false),
            Shape::Tools => (partial_answer(text).unwrap_or_default(), false),
        };
        if self.chunks.is_listening() && visible.len() > self.sent && visible.is_char_boundary(self.sent) {
            self.chunks
                .send(GenerateChunk::new(Role::Model, vec![Part::text(&visible[self.sent..])]));
            self.sent = visible.len();
        }
        if done {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// Where the first stop sequence starts, if one occurs.
fn stop_cut(text: &str, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

/// How much of `text` can be shown without showing the start of a stop
/// sequence that may still complete.
fn safe_len(text: &str, stops: &[String]) -> usize {
    let mut keep = text.len();
    for stop in stops {
        for (i, _) in stop.char_indices().skip(1) {
            if text.ends_with(&stop[..i]) {
                keep = keep.min(text.len() - i);
            }
        }
    }
    keep
}

/// The response for a finished generation.
fn finish(shape: Shape, outcome: &Outcome, stops: &[String]) -> Result<GenerateResponse> {
    let limited = |content: Vec<Part>, what: &str| {
        let mut r = GenerateResponse::from_message(Message::new(Role::Model, content));
        r.finish_reason = Some(FinishReason::Length);
        r.finish_message = Some(format!("the reply reached maxOutputTokens {what}"));
        r
    };
    let text_parts = |t: &str| if t.is_empty() { Vec::new() } else { vec![Part::text(t)] };
    match shape {
        Shape::Text => {
            let (text, stopped) = match stop_cut(&outcome.text, stops) {
                Some(cut) => (&outcome.text[..cut], true),
                None => (outcome.text.as_str(), false),
            };
            if outcome.hit_limit && !stopped {
                return Ok(limited(text_parts(text), "(or the end of the context)"));
            }
            Ok(GenerateResponse::from_message(Message::new(
                Role::Model,
                text_parts(text),
            )))
        }
        Shape::Json => {
            if outcome.hit_limit {
                return Ok(limited(text_parts(&outcome.text), "before the JSON was complete"));
            }
            Ok(GenerateResponse::from_message(Message::new(
                Role::Model,
                text_parts(&outcome.text),
            )))
        }
        Shape::Tools => match parse_reply(&outcome.text) {
            Some(Reply::Call { name, input }) => Ok(GenerateResponse::from_message(Message::new(
                Role::Model,
                vec![Part::tool_request(name, None, Some(input))],
            ))),
            Some(Reply::Answer(text)) => Ok(GenerateResponse::from_message(Message::new(
                Role::Model,
                text_parts(&text),
            ))),
            None if outcome.hit_limit => {
                let partial = partial_answer(&outcome.text).unwrap_or_default();
                Ok(limited(
                    text_parts(&partial),
                    "before the reply (a tool call or an answer) was complete",
                ))
            }
            None => Err(Error::with_status(
                Status::Internal,
                format!(
                    "the local model's grammar-constrained reply is not a tool call or an answer: {}",
                    outcome.text
                ),
            )),
        },
    }
}

#[cfg(test)]
mod tests;
