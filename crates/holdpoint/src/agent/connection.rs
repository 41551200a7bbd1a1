//! `Connection`: a multi-turn, streaming conversation with an agent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::AgentDef;
use super::io::{AgentInput, AgentOutput, AgentStreamChunk};
use super::load::Session;
use super::turn::Responder;
use super::worker::{self, WorkerIo};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::{Message, Part};

enum OutputSlot {
    Waiting(oneshot::Receiver<Result<AgentOutput>>),
    Done(Box<Result<AgentOutput>>),
}

/// A live conversation with an agent.
///
/// Inputs are processed one at a time; each turn streams its chunks and
/// ends with exactly one `turnEnd`. [`receive`](Self::receive) yields the
/// chunks of the current turn and stops after its `turnEnd`: send the next
/// input, then receive again. Dropping a receive stream cancels nothing.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use holdpoint::agent::{Agent, AgentInit};
/// use holdpoint::{ScriptedModel, ScriptedTurn};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = ScriptedModel::new("m");
/// model.push(ScriptedTurn::text("one"));
/// model.push(ScriptedTurn::text("two"));
/// let agent = Agent::builder("a").model(Arc::new(model)).build()?;
/// let conn = agent.connect(AgentInit::new()).await?;
/// conn.send_text("first")?;
/// let chunks: Vec<_> = conn.receive().collect().await;
/// assert!(chunks.last().unwrap().turn_end.is_some());
/// conn.send_text("second")?;
/// let out = conn.output().await?;
/// assert_eq!(out.text(), "two");
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
pub struct Connection {
    inputs: Mutex<Option<mpsc::UnboundedSender<AgentInput>>>,
    chunks: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<AgentStreamChunk>>>,
    output: tokio::sync::Mutex<OutputSlot>,
    ended: Arc<AtomicBool>,
    cancelled: AtomicBool,
    worker: tokio::task::AbortHandle,
    session_id: String,
    /// When the holds the connection opened on were saved.
    holds_saved_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Whether any input was sent yet.
    sent: AtomicBool,
    /// Whether the first input answered the holds the connection opened on.
    first_resumed: AtomicBool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("session_id", &self.session_id)
            .field("ended", &self.ended.load(Ordering::SeqCst))
            .finish()
    }
}

impl Connection {
    pub(crate) fn start(def: Arc<AgentDef>, session: Session, context: Arc<Map<String, Value>>) -> Self {
        let (input_tx, input_rx) = mpsc::unbounded_channel();
        let (chunk_tx, chunk_rx) = mpsc::unbounded_channel();
        let (output_tx, output_rx) = oneshot::channel();
        let ended = Arc::new(AtomicBool::new(false));
        let session_id = session.state.session_id.clone();
        let holds_saved_at = session.saved_at;
        let io = WorkerIo {
            inputs: Some(input_rx),
            first: None,
            responder: Responder::new(chunk_tx),
            output: Some(output_tx),
            ended: Arc::clone(&ended),
            parent: None,
        };
        let handle = tokio::spawn(worker::run(def, session, context, io));
        Connection {
            inputs: Mutex::new(Some(input_tx)),
            chunks: Arc::new(tokio::sync::Mutex::new(chunk_rx)),
            output: tokio::sync::Mutex::new(OutputSlot::Waiting(output_rx)),
            ended,
            cancelled: AtomicBool::new(false),
            worker: handle.abort_handle(),
            session_id,
            holds_saved_at,
            sent: AtomicBool::new(false),
            first_resumed: AtomicBool::new(false),
        }
    }

    /// The session this connection works on.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Queues an input. Fails with `INVALID_ARGUMENT` for a malformed input
    /// and `FAILED_PRECONDITION` once the agent has ended or the input side
    /// was closed.
    pub fn send(&self, input: AgentInput) -> Result<()> {
        input.validate()?;
        if self.ended.load(Ordering::SeqCst) {
            return Err(Error::FailedPrecondition(
                "the agent has ended (finished, failed or detached); open a new connection".into(),
            ));
        }
        let guard = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = guard.as_ref() else {
            return Err(Error::FailedPrecondition("the connection's input is closed".into()));
        };
        let resumes = input.resume.as_ref().is_some_and(|r| !r.is_empty());
        tx.send(input)
            .map_err(|_| Error::FailedPrecondition("the agent has ended; open a new connection".into()))?;
        if !self.sent.swap(true, Ordering::SeqCst) && resumes {
            self.first_resumed.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Sends a user text message.
    pub fn send_text(&self, text: impl Into<String>) -> Result<()> {
        self.send(AgentInput::text(text))
    }

    /// Sends a user message.
    pub fn send_message(&self, message: Message) -> Result<()> {
        self.send(AgentInput::message(message))
    }

    /// Sends resume directives (restart and respond parts, sorted by kind).
    pub fn send_resume(&self, directives: impl IntoIterator<Item = Part>) -> Result<()> {
        self.send(AgentInput::resume(Resume::from_parts(directives)))
    }

    /// The chunks of the current turn, ending after its `turnEnd` (or when
    /// the agent ends). Dropping the stream cancels nothing.
    pub fn receive(&self) -> BoxStream<'static, AgentStreamChunk> {
        let rx = Arc::clone(&self.chunks);
        futures::stream::unfold((rx, false), |(rx, done)| async move {
            if done {
                return None;
            }
            let chunk = rx.lock().await.recv().await?;
            let end = chunk.turn_end.is_some();
            Some((chunk, (rx, end)))
        })
        .boxed()
    }

    /// Asks the agent to go on in the background and returns its output
    /// (`finishReason: detached` with the pending snapshot). A turn that
    /// failed before it could detach is [`Error::TurnFailed`].
    pub async fn detach(&self) -> Result<AgentOutput> {
        self.send(AgentInput::detach())?;
        self.output().await
    }

    /// Closes the input side: queued inputs still run, then the agent ends.
    pub fn close(&self) {
        self.inputs.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Closes the input, waits for the agent to finish and returns its
    /// output. Chunks not yet received are discarded. Idempotent.
    ///
    /// A failed last turn is [`Error::TurnFailed`], carrying the failed
    /// output (see [`Error::failed_output`]). When the first input sent
    /// answered the holds the connection opened on, a successful output
    /// has their age in `held_for`.
    pub async fn output(&self) -> Result<AgentOutput> {
        self.close();
        let mut slot = self.output.lock().await;
        if let OutputSlot::Waiting(rx) = &mut *slot {
            let out = match rx.await {
                Ok(out) => out,
                Err(_) if self.cancelled.load(Ordering::SeqCst) => {
                    Err(Error::Cancelled("the connection was cancelled".into()))
                }
                Err(_) => Err(Error::Internal("the agent stopped without an output".into())),
            };
            *slot = OutputSlot::Done(Box::new(out));
            let mut chunks = self.chunks.lock().await;
            while chunks.try_recv().is_ok() {}
        }
        let out = match &*slot {
            OutputSlot::Done(out) => (**out).clone(),
            OutputSlot::Waiting(_) => Err(Error::Internal("output not settled".into())),
        }?;
        let held_since = self
            .first_resumed
            .load(Ordering::SeqCst)
            .then_some(self.holds_saved_at)
            .flatten();
        super::with_held_for(out, held_since).into_result()
    }

    /// Stops the agent now: the running turn is dropped (its changes are
    /// lost, nothing is written) and every task of the connection ends.
    pub fn cancel(&self) {
        self.close();
        self.ended.store(true, Ordering::SeqCst);
        self.cancelled.store(true, Ordering::SeqCst);
        self.worker.abort();
    }
}
