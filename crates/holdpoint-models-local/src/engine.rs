//! The llama.cpp side: the process-wide backend, models loaded once per
//! file and kept for the life of the process, and the decode loop.
//!
//! Everything here blocks; callers run it on a blocking thread. One
//! generation runs at a time per model file (llama.cpp contexts of one
//! model must not be created concurrently, and two cores gain nothing
//! from interleaving). The context and the tokens in its KV cache are kept
//! between calls, so a request that repeats the previous prompt's prefix
//! (the system prompt and tools, the history of an agent loop) only
//! evaluates what is new.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use holdpoint::{Error, Result, Status};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{LogOptions, send_logs_to_tracing};

use crate::prompt::Segment;

/// Tokens decoded per batch while reading the prompt.
const BATCH: usize = 512;

struct Loaded {
    backend: Option<&'static LlamaBackend>,
    engines: HashMap<PathBuf, Arc<Engine>>,
}

static LOADED: LazyLock<Mutex<Loaded>> = LazyLock::new(|| {
    Mutex::new(Loaded {
        backend: None,
        engines: HashMap::new(),
    })
});

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; carry on.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A model file loaded into memory.
pub(crate) struct Engine {
    backend: &'static LlamaBackend,
    model: &'static LlamaModel,
    /// How long loading took.
    pub load_time: Duration,
    session: Mutex<Option<Session>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

/// A context and the tokens its KV cache holds (sequence 0).
struct Session {
    ctx: LlamaContext<'static>,
    n_ctx: u32,
    threads: i32,
    tokens: Vec<LlamaToken>,
}

/// The engine of the model at `path`, loading it on first use. Models
/// stay loaded for the life of the process.
pub(crate) fn engine(path: &Path) -> Result<Arc<Engine>> {
    let mut loaded = lock(&LOADED);
    if let Some(engine) = loaded.engines.get(path) {
        return Ok(Arc::clone(engine));
    }
    let backend = match loaded.backend {
        Some(b) => b,
        None => {
            // llama.cpp's own log lines go to `tracing` (nothing is printed without a subscriber).
            send_logs_to_tracing(LogOptions::default());
            let b = LlamaBackend::init().map_err(|e| internal(format!("could not start llama.cpp: {e}")))?;
            let b: &'static LlamaBackend = Box::leak(Box::new(b));
            loaded.backend = Some(b);
            b
        }
    };
    if !path.is_file() {
        return Err(Error::with_status(
            Status::FailedPrecondition,
            format!("model file {} does not exist", path.display()),
        ));
    }
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).map_err(|e| {
        Error::with_status(
            Status::FailedPrecondition,
            format!("could not load model file {}: {e}", path.display()),
        )
    })?;
    let load_time = started.elapsed();
    tracing::info!(target: "holdpoint_models::local", path = %path.display(), load_ms = load_time.as_millis() as u64, "model loaded");
    let engine = Arc::new(Engine {
        backend,
        model: Box::leak(Box::new(model)),
        load_time,
        session: Mutex::new(None),
    });
    loaded.engines.insert(path.to_owned(), Arc::clone(&engine));
    Ok(engine)
}

/// One generation.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The prompt.
    pub prompt: Vec<Segment>,
    /// A GBNF grammar (root rule `root`) the output must match.
    pub grammar: Option<String>,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// 0 (or less) decodes greedily.
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k sampling.
    pub top_k: Option<i32>,
    /// The sampling seed.
    pub seed: u32,
    /// The context size (capped at the model's training context).
    pub context_size: u32,
    /// CPU threads.
    pub threads: i32,
}

/// What a generation produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// The text.
    pub text: String,
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Prompt tokens whose KV cache was reused from the previous call.
    pub cached_tokens: u64,
    /// Tokens generated (the end-of-turn token not counted).
    pub output_tokens: u64,
    /// Generation stopped at `max_tokens` or the end of the context.
    pub hit_limit: bool,
    /// Time spent evaluating the prompt.
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generate_time: Duration,
}

impl Engine {
    /// Runs `job`. `on_text` sees the whole text after every token that
    /// added some, and may end the generation; `cancel` stops it between
    /// tokens.
    pub fn generate(
        &self,
        job: &Job,
        cancel: &AtomicBool,
        mut on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Outcome> {
        let vocab = self.model.vocab();
        let mut tokens: Vec<LlamaToken> = Vec::new();
        if vocab.should_add_bos() {
            tokens.push(vocab.bos());
        }
        for segment in &job.prompt {
            match segment {
                Segment::Special(s) => tokens.extend(vocab.tokenize(s.as_bytes(), false, true)),
                Segment::Text(t) => tokens.extend(vocab.tokenize(t.as_bytes(), false, false)),
            }
        }
        let n_ctx = job.context_size.min(self.model.n_ctx_train()).max(64);
        if tokens.is_empty() || tokens.len() >= n_ctx as usize {
            return Err(Error::with_status(
                Status::InvalidArgument,
                format!(
                    "the prompt is {} tokens long; the local model's context holds {n_ctx}",
                    tokens.len()
                ),
            ));
        }
        let mut sampler = self.sampler(job)?;

        let mut guard = lock(&self.session);
        let reuse = matches!(&*guard, Some(s) if s.n_ctx == n_ctx && s.threads == job.threads);
        if !reuse {
            *guard = None;
            let params = LlamaContextParams::default()
                .with_n_ctx(NonZeroU32::new(n_ctx))
                .with_n_batch(BATCH as u32)
                .with_n_ubatch(BATCH as u32)
                .with_n_threads(job.threads)
                .with_n_threads_batch(job.threads);
            let ctx = self
                .model
                .new_context(self.backend, params)
                .map_err(|e| internal(format!("could not create a llama.cpp context: {e}")))?;
            *guard = Some(Session {
                ctx,
                n_ctx,
                threads: job.threads,
                tokens: Vec::new(),
            });
        }
        let Some(session) = guard.as_mut() else {
            return Err(internal("no llama.cpp context".to_owned()));
        };
        let result = run(session, self.model, &tokens, job, &mut sampler, cancel, &mut on_text);
        if result.is_err() {
            // The KV cache may hold a half-evaluated batch: start afresh next time.
            session.ctx.clear_kv_cache();
            session.tokens.clear();
        }
        result
    }

    fn sampler(&self, job: &Job) -> Result<LlamaSampler> {
        let mut chain = Vec::new();
        if let Some(grammar) = &job.grammar {
            chain.push(
                LlamaSampler::grammar(self.model, grammar, "root")
                    .map_err(|e| internal(format!("llama.cpp rejected the generated grammar ({e}):\n{grammar}")))?,
            );
        }
        if job.temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            if let Some(k) = job.top_k.filter(|k| *k > 0) {
                chain.push(LlamaSampler::top_k(k));
            }
            if let Some(p) = job.top_p.filter(|p| *p > 0.0 && *p < 1.0) {
                chain.push(LlamaSampler::top_p(p, 1));
            }
            chain.push(LlamaSampler::temp(job.temperature));
            chain.push(LlamaSampler::dist(job.seed));
        }
        Ok(LlamaSampler::chain_simple(chain))
    }
}

/// Evaluates the prompt (reusing the cached prefix) and generates.
fn run(
    session: &mut Session,
    model: &'static LlamaModel,
    tokens: &[LlamaToken],
    job: &Job,
    sampler: &mut LlamaSampler,
    cancel: &AtomicBool,
    on_text: &mut impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Outcome> {
    let started = Instant::now();
    let common = reuse_prefix(session, tokens);
    let mut batch = LlamaBatch::new(BATCH, 1);
    let last_index = evaluate_prompt(session, tokens, common, &mut batch, cancel)?;
    let prompt_time = started.elapsed();

    let started = Instant::now();
    let mut out = Outcome {
        prompt_tokens: tokens.len() as u64,
        cached_tokens: common as u64,
        prompt_time,
        ..Outcome::default()
    };
    let step = Step {
        model,
        job,
        cancel,
        prompt_len: tokens.len(),
    };
    generate(session, &step, sampler, &mut batch, last_index, &mut out, on_text)?;
    out.generate_time = started.elapsed();
    Ok(out)
}

/// What the generation loop reads of one job.
struct Step<'a> {
    model: &'static LlamaModel,
    job: &'a Job,
    cancel: &'a AtomicBool,
    prompt_len: usize,
}

/// How many of `tokens` the session's KV cache already holds (the longest
/// common prefix, keeping at least one token to evaluate: its logits start
/// the generation); the rest of the cache is cleared.
fn reuse_prefix(session: &mut Session, tokens: &[LlamaToken]) -> usize {
    // Reuse the KV cache of the longest common prefix, keeping at least
    // one token to evaluate (its logits start the generation).
    let mut common = session
        .tokens
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(tokens.len() - 1);
    if common < session.tokens.len() {
        let removed = session
            .ctx
            .clear_kv_cache_seq(Some(0), Some(common as u32), None)
            .unwrap_or(false);
        if !removed {
            session.ctx.clear_kv_cache();
            common = 0;
        }
        session.tokens.truncate(common);
    }
    common
}

/// Evaluates `tokens` after the first `common` in batches; the index of
/// the last token's logits in the last batch.
fn evaluate_prompt(
    session: &mut Session,
    tokens: &[LlamaToken],
    common: usize,
    batch: &mut LlamaBatch,
    cancel: &AtomicBool,
) -> Result<i32> {
    let mut last_index = 0;
    for (chunk_start, chunk) in tokens[common..]
        .chunks(BATCH)
        .enumerate()
        .map(|(i, c)| (common + i * BATCH, c))
    {
        if cancel.load(Ordering::Relaxed) {
            return Err(cancelled());
        }
        batch.clear();
        for (i, token) in chunk.iter().enumerate() {
            let pos = chunk_start + i;
            batch
                .add(*token, pos as i32, &[0], pos == tokens.len() - 1)
                .map_err(|e| internal(format!("llama.cpp batch: {e}")))?;
        }
        session
            .ctx
            .decode(batch)
            .map_err(|e| internal(format!("llama.cpp could not evaluate the prompt: {e}")))?;
        session.tokens.extend_from_slice(chunk);
        last_index = chunk.len() as i32 - 1;
    }
    Ok(last_index)
}

/// Samples tokens into `out` until end of generation, the limit (the
/// job's maximum and the context's room), `on_text` breaking, or a cancel.
fn generate(
    session: &mut Session,
    step: &Step<'_>,
    sampler: &mut LlamaSampler,
    batch: &mut LlamaBatch,
    mut last_index: i32,
    out: &mut Outcome,
    on_text: &mut impl FnMut(&str) -> ControlFlow<()>,
) -> Result<()> {
    let (vocab, job, cancel) = (step.model.vocab(), step.job, step.cancel);
    let mut pending: Vec<u8> = Vec::new();
    let room = (session.n_ctx as usize).saturating_sub(step.prompt_len);
    let limit = (job.max_tokens as usize).min(room);
    let mut finished = false;
    while (out.output_tokens as usize) < limit {
        if cancel.load(Ordering::Relaxed) {
            return Err(cancelled());
        }
        let token = sampler.sample(&session.ctx, last_index);
        if vocab.is_eog(token) {
            finished = true;
            break;
        }
        out.output_tokens += 1;
        pending.extend(vocab.token_to_piece(token, false, None));
        if take_utf8(&mut pending, &mut out.text) && on_text(&out.text).is_break() {
            finished = true;
            break;
        }
        if (out.output_tokens as usize) >= limit {
            break;
        }
        batch.clear();
        let pos = session.tokens.len() as i32;
        batch
            .add(token, pos, &[0], true)
            .map_err(|e| internal(format!("llama.cpp batch: {e}")))?;
        session
            .ctx
            .decode(batch)
            .map_err(|e| internal(format!("llama.cpp could not evaluate a token: {e}")))?;
        session.tokens.push(token);
        last_index = 0;
    }
    if !pending.is_empty() {
        out.text.push_str(&String::from_utf8_lossy(&pending));
    }
    out.hit_limit = !finished;
    Ok(())
}

/// Moves the complete UTF-8 characters at the start of `pending` to
/// `text` (invalid bytes as U+FFFD); true when some text was added.
fn take_utf8(pending: &mut Vec<u8>, text: &mut String) -> bool {
    let before = text.len();
    loop {
        match std::str::from_utf8(pending) {
            Ok(s) => {
                text.push_str(s);
                pending.clear();
                break;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                text.push_str(&String::from_utf8_lossy(&pending[..valid]));
                match e.error_len() {
                    // An incomplete character: wait for the next token.
                    None => {
                        pending.drain(..valid);
                        break;
                    }
                    Some(bad) => {
                        text.push('\u{FFFD}');
                        pending.drain(..valid + bad);
                    }
                }
            }
        }
    }
    text.len() > before
}

fn internal(message: String) -> Error {
    Error::with_status(Status::Internal, message)
}

fn cancelled() -> Error {
    Error::with_status(Status::Cancelled, "the local model call was cancelled")
}

#[cfg(test)]
mod tests;
