//! Scenarios: a generation that pauses, a decision on its holds, and the
//! resume that follows, written as those three named steps.
//!
//! ```ignore
//! let s = Scenario::new([calls(&[("transfer", BOB())]), ScriptedTurn::text("sent")]).tool(transfer.clone());
//! let paused = s.pause().await; // runs the prompt; the generation must pause
//! let call = paused.claim(&transfer, 0); // the tool's own typed claim on hold 0
//! let done = paused.restart(call.restart(Some(approved()))).resume().await;
//! ```
//!
//! Every run of one scenario shares its model (its turns are consumed in
//! order), its tools and its middleware, so state the tools and stages
//! record accumulates across the pause and the resume.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use holdpoint::middleware::Middleware;
use holdpoint::model::ChunkSink;
use holdpoint::tool::{Interrupted, Tool};
use holdpoint::{
    Error, GenerateOptions, Generation, Message, Part, Result, ResumableTool, Resume, ScriptedModel, ScriptedTurn,
    generate,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::support::{model, options, output, requests, responses};

/// A scripted model with its tools, middleware and request context.
pub struct Scenario {
    /// The scripted model every run of the scenario calls.
    pub model: ScriptedModel,
    tools: Vec<Arc<dyn Tool>>,
    middleware: Vec<Arc<dyn Middleware>>,
    context: Map<String, Value>,
}

impl Scenario {
    /// A scenario whose model answers with `turns`, one a model call.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Scenario {
            model: model(turns),
            tools: Vec::new(),
            middleware: Vec::new(),
            context: Map::new(),
        }
    }

    /// Offers `tool` to the model.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds a middleware stage inside the ones added before it.
    pub fn middleware(mut self, stage: impl Middleware + 'static) -> Self {
        self.middleware.push(Arc::new(stage));
        self
    }

    /// Sets one key of the request context every run sees.
    pub fn context(mut self, key: &str, value: Value) -> Self {
        self.context.insert(key.into(), value);
        self
    }

    fn options(&self, messages: Vec<Message>) -> GenerateOptions {
        let mut opts = options(&self.model, self.tools.clone(), messages);
        opts.middleware = self.middleware.clone();
        opts.context = Arc::new(self.context.clone());
        opts
    }

    /// Runs the prompt "go" to its end, a pause or an error.
    pub async fn run(&self) -> Result<Generation> {
        generate(self.options(vec![Message::user_text("go")])).await
    }

    /// Runs the prompt "go"; the generation must pause.
    pub async fn pause(&self) -> Paused<'_> {
        let g = self.run().await.expect("the first run fails");
        assert!(g.is_interrupted(), "the first run did not pause: {:?}", g.response);
        self.paused(g)
    }

    /// Takes `generation`, paused, as the point to decide on.
    pub fn paused(&self, generation: Generation) -> Paused<'_> {
        Paused {
            scenario: self,
            generation,
        }
    }
}

/// A paused generation of a scenario. It derefs to the [`Generation`]; each
/// decision starts a fresh resume, so one pause can be resumed several ways.
pub struct Paused<'s> {
    scenario: &'s Scenario,
    /// The paused generation; its messages are the history a resume sends.
    pub generation: Generation,
}

impl Deref for Paused<'_> {
    type Target = Generation;

    fn deref(&self) -> &Generation {
        &self.generation
    }
}

impl DerefMut for Paused<'_> {
    fn deref_mut(&mut self) -> &mut Generation {
        &mut self.generation
    }
}

impl<'s> Paused<'s> {
    /// The paused tool requests, in the order of the model message.
    pub fn holds(&self) -> Vec<Part> {
        self.response.interrupts()
    }

    /// Paused request `i`.
    pub fn hold(&self, i: usize) -> Part {
        self.holds().into_iter().nth(i).expect("no such hold")
    }

    /// Every tool request of the paused model message, paused or not.
    pub fn requests(&self) -> Vec<Part> {
        requests(self.messages.last().expect("no messages"))
    }

    /// `tool`'s typed claim on hold `i`; the tool must claim it.
    pub fn claim<In, Out, Res>(&self, tool: &ResumableTool<In, Out, Res>, i: usize) -> Interrupted<In, Out, Res>
    where
        In: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
        Out: Serialize + JsonSchema + Send + 'static,
        Res: DeserializeOwned + Serialize + JsonSchema + Default + Send + 'static,
    {
        tool.interrupted(&self.hold(i))
            .expect("the tool does not claim the hold")
    }

    /// A decision with no directives yet.
    pub fn decide(&self) -> Decision<'s> {
        Decision {
            scenario: self.scenario,
            messages: self.messages.clone(),
            holds: self.holds(),
            resume: Resume::default(),
            middleware: self.scenario.middleware.clone(),
            chunks: None,
        }
    }

    /// Decides to restart with `directive` (a restart part).
    pub fn restart(&self, directive: impl Directive) -> Decision<'s> {
        self.decide().restart(directive)
    }

    /// Decides to restart hold `i` with resume data `data`.
    pub fn restart_with(&self, i: usize, data: Value) -> Decision<'s> {
        self.decide().restart_with(i, data)
    }

    /// Decides to restart hold `i` with no resume data.
    pub fn bare_restart(&self, i: usize) -> Decision<'s> {
        self.decide().bare_restart(i)
    }

    /// Decides to answer with `directive` (a respond part).
    pub fn respond(&self, directive: impl Directive) -> Decision<'s> {
        self.decide().respond(directive)
    }

    /// Decides to answer hold `i` with `output`, not running its tool.
    pub fn respond_with(&self, i: usize, output: Value) -> Decision<'s> {
        self.decide().respond_with(i, output)
    }
}

/// A restart or respond part, or the result of building one.
pub trait Directive {
    /// The part; panics when building it failed.
    fn part(self) -> Part;
}

impl Directive for Part {
    fn part(self) -> Part {
        self
    }
}

impl Directive for Result<Part> {
    fn part(self) -> Part {
        self.expect("the directive does not build")
    }
}

/// The directives answering a pause, and how the resume runs.
pub struct Decision<'s> {
    scenario: &'s Scenario,
    messages: Vec<Message>,
    holds: Vec<Part>,
    resume: Resume,
    middleware: Vec<Arc<dyn Middleware>>,
    chunks: Option<ChunkSink>,
}

impl<'s> Decision<'s> {
    fn hold(&self, i: usize) -> Part {
        self.holds.get(i).cloned().expect("no such hold")
    }

    /// Adds the restart `directive`.
    pub fn restart(mut self, directive: impl Directive) -> Self {
        self.resume.restart.push(directive.part());
        self
    }

    /// Restarts hold `i` with resume data `data`.
    pub fn restart_with(self, i: usize, data: Value) -> Self {
        let directive = self.hold(i).restart(Some(data));
        self.restart(directive)
    }

    /// Restarts hold `i` with no resume data.
    pub fn bare_restart(self, i: usize) -> Self {
        let directive = self.hold(i).restart(None);
        self.restart(directive)
    }

    /// Adds the respond `directive`.
    pub fn respond(mut self, directive: impl Directive) -> Self {
        self.resume.respond.push(directive.part());
        self
    }

    /// Answers hold `i` with `output`.
    pub fn respond_with(self, i: usize, output: Value) -> Self {
        let directive = self.hold(i).respond(output);
        self.respond(directive)
    }

    /// Resumes with no middleware at all.
    pub fn without_middleware(mut self) -> Self {
        self.middleware.clear();
        self
    }

    /// Streams the resume's chunks into `sink`.
    pub fn chunks(mut self, sink: ChunkSink) -> Self {
        self.chunks = Some(sink);
        self
    }

    /// Resumes the paused history with the directives decided.
    pub async fn run(self) -> Result<Generation> {
        let mut opts = self.scenario.options(self.messages).resume(self.resume);
        opts.middleware = self.middleware;
        if let Some(sink) = self.chunks {
            opts = opts.chunks(sink);
        }
        generate(opts).await
    }

    /// Resumes; the resume must succeed.
    pub async fn resume(self) -> Generation {
        self.run().await.expect("the resume fails")
    }

    /// Resumes; the resume must fail, and its error is returned.
    pub async fn resume_fails(self) -> Error {
        match self.run().await {
            Ok(g) => panic!("the resume succeeded: {:?}", g.response),
            Err(e) => e,
        }
    }

    /// Resumes; the generation must pause again.
    pub async fn pause(self) -> Paused<'s> {
        let scenario = self.scenario;
        let g = self.resume().await;
        assert!(g.is_interrupted(), "the resume did not pause again: {:?}", g.response);
        scenario.paused(g)
    }
}

/// The outputs of the tool message after the first model message: the
/// results the model was given for its first round of calls.
pub fn outputs(g: &Generation) -> Vec<Value> {
    responses(&g.messages[2]).iter().map(output).collect()
}
