//! Running an action for the reflection API, whatever the transport: v1's
//! HTTP routes and v2's WebSocket JSON-RPC both call [`execute`] with a
//! sink for the stream chunks and, for a bidirectional run, the stream of
//! inputs (docs/reference.md §18).

use std::sync::Arc;

use futures::StreamExt;
use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, AgentStreamChunk, Connection, DirectCall, RunOptions};
use holdpoint::model::{ChunkSink, GenerateRequest, Model};
use holdpoint::tool::{SchemaValidator, Tool, ToolOutcome};
use holdpoint::{ErrorBody, Status};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::actions::Target;
use super::trace::Trace;
use super::{Cancel, Shared};

/// Where a run's stream chunks go (as JSON, in order).
pub(crate) type Sink = Arc<dyn Fn(Value) + Send + Sync>;

/// One run as the CLI asks for it (Genkit's `RunActionRequest`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunRequest {
    pub key: String,
    #[serde(default)]
    pub input: Value,
    #[serde(default)]
    pub init: Option<Value>,
}

/// A run that failed: its status and message, and what Genkit's `Status`
/// carries in `details` beside the trace id.
#[derive(Debug)]
pub(crate) struct Failure {
    pub body: ErrorBody,
    pub details: Map<String, Value>,
}

impl From<ErrorBody> for Failure {
    fn from(body: ErrorBody) -> Self {
        Failure {
            body,
            details: Map::new(),
        }
    }
}

impl From<holdpoint::Error> for Failure {
    fn from(e: holdpoint::Error) -> Self {
        e.body().into()
    }
}

fn failure(status: Status, message: impl Into<String>) -> Failure {
    ErrorBody {
        status,
        message: message.into(),
    }
    .into()
}

fn cancelled() -> Failure {
    failure(Status::Cancelled, "Action was cancelled")
}

/// gRPC's number for `status` (Genkit's `StatusCodes`, the `code` of a
/// reflection error).
pub(crate) fn code(status: Status) -> u8 {
    match status {
        Status::Cancelled => 1,
        Status::InvalidArgument => 3,
        Status::DeadlineExceeded => 4,
        Status::NotFound => 5,
        Status::AlreadyExists => 6,
        Status::PermissionDenied => 7,
        Status::ResourceExhausted => 8,
        Status::FailedPrecondition => 9,
        Status::Aborted => 10,
        Status::Internal => 13,
        Status::Unavailable => 14,
        Status::Unauthenticated => 16,
    }
}

/// Genkit's `Status` object of a failed run: `{code, status, message,
/// details: {traceId, …}}`.
pub(crate) fn status_object(f: &Failure, trace_id: &str) -> Value {
    let mut details = f.details.clone();
    details.insert("traceId".into(), json!(trace_id));
    json!({
        "code": code(f.body.status),
        "status": f.body.status,
        "message": f.body.message,
        "details": details,
    })
}

fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, Failure> {
    serde_json::from_value(value).map_err(|e| failure(Status::InvalidArgument, format!("{what}: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| failure(Status::Internal, e.to_string()))
}

/// Runs `target`. Chunks go to `sink` when given; `inputs`, when given,
/// is a bidirectional run's input stream (the request's `input` is then
/// unused, as in Genkit): each item is one more input to the agent, and
/// the run ends once the stream ends and the last turn settles.
pub(crate) async fn execute(
    s: &Shared,
    target: Target,
    req: RunRequest,
    trace: &mut Trace,
    sink: Option<Sink>,
    inputs: Option<mpsc::UnboundedReceiver<Value>>,
) -> Result<Value, Failure> {
    match target {
        Target::Run(agent) => run_turn(s, &agent, req, trace, sink, inputs).await,
        Target::Snapshot(agent) => snapshot(&agent, req.input).await,
        Target::Abort(agent) => abort(&agent, req.input).await,
        Target::Tool(agent, tool) => run_tool(s, agent, tool, req.input, trace).await,
        Target::Model(model) => run_model(s, model, req.input, trace, sink).await,
    }
}

async fn snapshot(agent: &Agent, input: Value) -> Result<Value, Failure> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Lookup {
        snapshot_id: Option<String>,
        session_id: Option<String>,
    }
    let lookup: Lookup = decode(input, "expected {\"snapshotId\"} or {\"sessionId\"}")?;
    let found = match (&lookup.snapshot_id, &lookup.session_id) {
        (Some(id), _) => agent.snapshot(id, Access::Full).await,
        (None, Some(session)) => agent.latest_snapshot(session, Access::Full).await,
        (None, None) => return Err(failure(Status::InvalidArgument, "give snapshotId or sessionId")),
    }?;
    let target = lookup.snapshot_id.or(lookup.session_id).unwrap_or_default();
    let snap = found.ok_or_else(|| {
        failure(
            Status::NotFound,
            format!("Snapshot '{target}' not found for agent '{}'.", agent.name()),
        )
    })?;
    to_json(&snap)
}

async fn abort(agent: &Agent, input: Value) -> Result<Value, Failure> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct AbortInput {
        snapshot_id: String,
    }
    let AbortInput { snapshot_id } = decode(input, "expected {\"snapshotId\"}")?;
    let previous = agent.abort(&snapshot_id, Access::Full).await?;
    Ok(json!({"snapshotId": snapshot_id, "status": previous}))
}

/// Records the calls `input` restarts on the trace.
fn note_restarts(trace: &mut Trace, input: &AgentInput) {
    if let Some(Ok(Value::Object(r))) = input.resume.as_ref().map(serde_json::to_value) {
        for part in r.get("restart").and_then(Value::as_array).into_iter().flatten() {
            trace.tool_call(part, "resumed");
        }
    }
}

fn emit(sink: Option<&Sink>, chunk: &AgentStreamChunk) {
    if let Some(sink) = sink
        && let Ok(v) = serde_json::to_value(chunk)
    {
        sink(v);
    }
}

async fn run_turn(
    s: &Shared,
    agent: &Agent,
    req: RunRequest,
    trace: &mut Trace,
    sink: Option<Sink>,
    inputs: Option<mpsc::UnboundedReceiver<Value>>,
) -> Result<Value, Failure> {
    let first = match inputs {
        Some(_) => None,
        None => {
            let input: AgentInput = decode(req.input, "the input is not an AgentInput")?;
            input.validate()?;
            note_restarts(trace, &input);
            Some(input)
        }
    };
    let init: AgentInit = match req.init {
        None | Some(Value::Null) => AgentInit::default(),
        Some(v) => decode(v, "the init is not an AgentInit")?,
    };
    let conn = Arc::new(agent.connect_with(RunOptions::new(init)).await?);
    trace
        .root
        .attributes
        .insert("genkit:metadata:agent:sessionId".into(), json!(conn.session_id()));
    s.track(&trace.id, Cancel::Conn(Arc::clone(&conn)));
    let streamed = match (first, inputs) {
        (Some(input), _) => match conn.send(input) {
            Ok(()) => {
                let mut chunks = conn.receive();
                while let Some(chunk) = chunks.next().await {
                    emit(sink.as_ref(), &chunk);
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        },
        (None, Some(rx)) => converse(&conn, rx, sink.as_ref(), trace).await,
        (None, None) => Ok(()),
    };
    if let Err(e) = streamed {
        s.untrack(&trace.id);
        conn.cancel();
        return Err(e);
    }
    let out = conn.output().await.or_else(holdpoint::Error::into_failed_output);
    if s.untrack(&trace.id).is_none() {
        return Err(cancelled());
    }
    let out = out?;
    for part in out.interrupts() {
        if let Ok(part) = serde_json::to_value(&part) {
            trace.tool_call(&part, "interrupt");
        }
    }
    to_json(&out)
}

/// A bidirectional run: forwards each input of `rx` to the connection and
/// streams every turn's chunks until the agent ends (the input stream
/// ended and the queued turns ran, or the agent ended by itself).
async fn converse(
    conn: &Connection,
    mut rx: mpsc::UnboundedReceiver<Value>,
    sink: Option<&Sink>,
    trace: &mut Trace,
) -> Result<(), Failure> {
    let mut open = true;
    let mut chunks = conn.receive();
    loop {
        tokio::select! {
            next = rx.recv(), if open => match next {
                Some(value) => {
                    let input: AgentInput = decode(value, "an input of the stream is not an AgentInput")?;
                    note_restarts(trace, &input);
                    conn.send(input)?;
                }
                None => {
                    open = false;
                    conn.close();
                }
            },
            chunk = chunks.next() => match chunk {
                Some(chunk) => {
                    emit(sink, &chunk);
                    // `receive` stops after a turn's end: the next turn
                    // needs a new one.
                    if chunk.turn_end.is_some() {
                        chunks = conn.receive();
                    }
                }
                // The chunk channel closed: the agent ended.
                None => return Ok(()),
            },
        }
    }
}

/// Calls a tool once, as Genkit runs a tool action, but through the
/// approval gate of `agent` (the agent it is listed from,
/// [`Agent::call_tool`]): its output is the result; a hold — the tool's
/// own interrupt, or a rule's or ToolApproval's hold, the tool then not
/// run — fails the run as Genkit's `ToolInterruptError` does, with the
/// interrupt data in `details.interrupt` (and, for a middleware's hold,
/// its label in `details.interruptedBy`) and on the trace. Nothing can
/// answer such a hold: approving the call takes a turn of the agent.
async fn run_tool(
    s: &Shared,
    agent: Agent,
    tool: Arc<dyn Tool>,
    input: Value,
    trace: &mut Trace,
) -> Result<Value, Failure> {
    let name = tool.name().to_owned();
    // Checked here, as Genkit's action checks its input schema: a typed
    // tool reports a bad input to the model as a soft failure instead.
    if let Some(schema) = &tool.definition().input_schema {
        SchemaValidator::new(schema.clone()).check(&format!("input of the tool {name}"), &input)?;
    }
    let called = name.clone();
    let task = tokio::spawn(async move { agent.call_tool(&called, input).await });
    s.track(&trace.id, Cancel::Task(task.abort_handle()));
    let joined = task.await;
    s.untrack(&trace.id);
    let call = match joined {
        Ok(call) => call?,
        Err(e) if e.is_cancelled() => return Err(cancelled()),
        Err(e) => return Err(failure(Status::Internal, format!("the tool {name} panicked: {e}"))),
    };
    let Some(DirectCall { outcome, held_by, .. }) = call else {
        return Err(failure(Status::NotFound, format!("the tool {name} is gone")));
    };
    match outcome {
        ToolOutcome::Output { output, .. } => Ok(output),
        ToolOutcome::Interrupt(data) => {
            let data = Value::Object(data);
            trace
                .root
                .attributes
                .insert("genkit:metadata:interrupt".into(), json!(data.to_string()));
            let message = match &held_by {
                Some(by) => format!(
                    "ToolInterruptError: {name} was held for approval by {by} and did not run; approve it in a turn of its agent"
                ),
                None => format!("ToolInterruptError: {name} was interrupted"),
            };
            let mut f = failure(Status::Internal, message);
            f.details.insert("interrupt".into(), data);
            if let Some(by) = held_by {
                f.details.insert("interruptedBy".into(), json!(by));
            }
            Err(f)
        }
        ToolOutcome::Failed(message) => Err(failure(Status::Internal, message)),
    }
}

/// Calls a model once, as Genkit runs a model action: a `GenerateRequest`
/// in, the `GenerateResponse` out, its chunks streamed.
async fn run_model(
    s: &Shared,
    model: Arc<dyn Model>,
    input: Value,
    trace: &mut Trace,
    sink: Option<Sink>,
) -> Result<Value, Failure> {
    let request: GenerateRequest = decode(input, "the input is not a GenerateRequest")?;
    let chunks = match sink {
        Some(sink) => ChunkSink::new(move |chunk| {
            if let Ok(v) = serde_json::to_value(&chunk) {
                sink(v);
            }
        }),
        None => ChunkSink::none(),
    };
    let name = model.name().to_owned();
    let task = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut response = model.generate(request, chunks).await?;
        if response.latency_ms.is_none() {
            response.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        }
        Ok::<_, holdpoint::Error>(response)
    });
    s.track(&trace.id, Cancel::Task(task.abort_handle()));
    let joined = task.await;
    s.untrack(&trace.id);
    match joined {
        Ok(response) => to_json(&response?),
        Err(e) if e.is_cancelled() => Err(cancelled()),
        Err(e) => Err(failure(Status::Internal, format!("the model {name} panicked: {e}"))),
    }
}
