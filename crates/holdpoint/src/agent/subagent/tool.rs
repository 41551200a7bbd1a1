//! `SubagentTool`: runs a child agent's turn as one tool call.

use async_trait::async_trait;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{CALLER, PARENT_CALL, SUBAGENT, SUBAGENT_OF, SurfacedHold, parent_token};
use crate::agent::{Agent, AgentInit, AgentInput, AgentOutput, RunOptions};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::Message;
use crate::model::{FinishReason, GenerateChunk, ToolDefinition};
use crate::tool::{Tool, ToolCall, ToolContext, ToolOutcome};

/// What a child's failed turn does to its parent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChildFailure {
    /// The call fails softly: the parent's model sees the error as the
    /// tool's result and goes on.
    #[default]
    Tool,
    /// The parent's turn fails too (`tool "X" failed: …`).
    Turn,
}

/// Options of a sub-agent tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubagentOptions {
    /// What a child's failed turn does to the parent.
    pub on_failure: ChildFailure,
}

/// A child agent as a tool of its parent (see
/// [`AgentBuilder::subagent`](crate::agent::AgentBuilder::subagent)).
pub struct SubagentTool {
    parent: String,
    agent: Agent,
    definition: ToolDefinition,
    options: SubagentOptions,
}

impl std::fmt::Debug for SubagentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentTool")
            .field("parent", &self.parent)
            .field("agent", &self.agent.name())
            .finish()
    }
}

impl SubagentTool {
    /// `agent` as a tool of the agent named `parent`.
    pub fn new(parent: &str, agent: Agent, options: SubagentOptions) -> Self {
        let description = agent.description().map_or_else(
            || format!("Delegates a task to the agent \"{}\".", agent.name()),
            str::to_owned,
        );
        let mut metadata = Map::new();
        metadata.insert(SUBAGENT.to_owned(), json!({ "agent": agent.name() }));
        SubagentTool {
            parent: parent.to_owned(),
            definition: ToolDefinition {
                name: agent.name().to_owned(),
                description,
                input_schema: Some(json!({
                    "type": "object",
                    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
                    "required": ["input"]
                })),
                output_schema: None,
                metadata: Some(metadata),
            },
            agent,
            options,
        }
    }

    /// The child's first message: the task, linked to the calling session
    /// and call.
    fn first_message(&self, ctx: &ToolContext, text: String) -> Message {
        let caller = ctx
            .request_context()
            .get(CALLER)
            .and_then(|c| c.get("sessionId"))
            .cloned()
            .unwrap_or(Value::Null);
        let link = json!({
            "agent": self.parent,
            "sessionId": caller,
            "tool": ctx.name(),
            "ref": ctx.reference(),
        });
        let mut message = Message::user_text(text);
        let mut meta = Map::new();
        meta.insert(SUBAGENT_OF.to_owned(), link);
        message.metadata = Some(meta);
        message
    }

    /// Runs the child's turn, forwarding its chunks (marked with its path)
    /// when the parent's turn streams.
    async fn run_child(&self, ctx: &ToolContext, init: AgentInit, input: AgentInput) -> Result<AgentOutput> {
        let mut context = ctx.request_context().clone();
        context.remove(CALLER);
        context.insert(PARENT_CALL.to_owned(), Value::String(parent_token().to_owned()));
        if !ctx.chunks.is_listening() {
            // In this task: the child starts from the snapshot its parent's
            // claim checked, and its row goes up with the parent's.
            let parent = crate::agent::handoff::turn_writes();
            let preloaded = init
                .snapshot_id
                .as_deref()
                .and_then(|id| parent.as_ref()?.preloaded(id));
            let options = RunOptions::new(init).context(context);
            return self.agent.run_as_child(input, options, parent, preloaded).await;
        }
        let options = RunOptions::new(init).context(context);
        let connection = self.agent.connect_with(options).await?;
        // The child's worker is a task of its own here: dropping the
        // parent's call (its turn dropped, its process stopping) must stop
        // the child too, as it does when the child runs in this task.
        let mut guard = CancelOnDrop(Some(&connection));
        connection.send(input)?;
        connection.close();
        let step = json!({
            "agent": self.agent.name(),
            "sessionId": connection.session_id(),
            "tool": ctx.name(),
            "ref": ctx.reference(),
        });
        let mut chunks = connection.receive();
        while let Some(chunk) = chunks.next().await {
            if let Some(model_chunk) = chunk.model_chunk {
                ctx.chunks.send(marked(model_chunk, &step));
            }
        }
        let out = connection.output().await;
        // The child ended on its own: nothing to cancel.
        guard.0 = None;
        out
    }

    fn outcome(&self, result: Result<AgentOutput>) -> Result<ToolOutcome> {
        match result {
            Ok(out) if out.finish_reason == FinishReason::Interrupted => {
                let snapshot_id = out.snapshot_id.clone().ok_or_else(|| {
                    Error::Internal(format!("agent \"{}\" paused without a snapshot", self.agent.name()))
                })?;
                let interrupts = out.message.iter().flat_map(|m| m.interrupts().cloned()).collect();
                let hold = SurfacedHold {
                    agent: self.agent.name().to_owned(),
                    session_id: out.session_id,
                    snapshot_id,
                    interrupts,
                };
                Ok(ToolOutcome::Interrupt(hold.into_data()))
            }
            Ok(out) => Ok(ToolOutcome::output(Value::String(out.text()))),
            Err(Error::TurnFailed(out)) => {
                let why = out.error.as_ref().map_or("the turn failed", |e| e.message.as_str());
                let message = format!("agent \"{}\" failed: {why}", self.agent.name());
                match self.options.on_failure {
                    ChildFailure::Tool => Ok(ToolOutcome::Failed(message)),
                    ChildFailure::Turn => Err(Error::ToolFailed {
                        tool: self.definition.name.clone(),
                        message,
                    }),
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// `chunk` marked as the child's: `custom.subagent` is the path from the
/// parent's call down to the session that produced it (outermost first).
fn marked(mut chunk: GenerateChunk, step: &Value) -> GenerateChunk {
    let mut path = vec![step.clone()];
    if let Some(inner) = chunk
        .custom
        .as_ref()
        .and_then(|c| c.get(SUBAGENT))
        .and_then(Value::as_array)
    {
        path.extend(inner.iter().cloned());
    }
    let mut custom = match chunk.custom.take() {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    custom.insert(SUBAGENT.to_owned(), Value::Array(path));
    chunk.custom = Some(Value::Object(custom));
    chunk
}

/// Cancels the child's connection when dropped while armed.
struct CancelOnDrop<'a>(Option<&'a crate::agent::Connection>);

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.0 {
            connection.cancel();
        }
    }
}

/// The nested answers a restart of a surfaced hold carries.
pub(crate) fn nested_resume(tool: &str, resumed: &Map<String, Value>) -> Result<Resume> {
    let refuse = || {
        Error::InvalidArgument(format!(
            "a restart of sub-agent call \"{tool}\" must carry the child's answers as resume data {{\"{SUBAGENT}\": {{\"restart\": [...], \"respond\": [...]}}}} (or answer the nested call by its compound ref, as listed by pending)"
        ))
    };
    let value = resumed.get(SUBAGENT).ok_or_else(refuse)?;
    let resume = Resume::deserialize(value)
        .map_err(|e| Error::InvalidArgument(format!("sub-agent call \"{tool}\": bad nested answers: {e}")))?;
    if resume.is_empty() {
        return Err(refuse());
    }
    Ok(resume)
}

#[async_trait]
impl Tool for SubagentTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        let ctx = &call.context;
        if !self.agent.is_server_managed() {
            return Err(Error::FailedPrecondition(format!(
                "sub-agent \"{}\" keeps no sessions: a sub-agent needs its parent's session store",
                self.agent.name()
            )));
        }
        let result = match ctx.resumed() {
            None => {
                let text = match call.input.get("input").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => match call.input.as_str() {
                        Some(t) => t.to_owned(),
                        None => {
                            return Ok(ToolOutcome::Failed(format!(
                                "tool \"{}\": the input needs a string \"input\"",
                                self.definition.name
                            )));
                        }
                    },
                };
                let message = self.first_message(ctx, text);
                self.run_child(ctx, AgentInit::new(), AgentInput::message(message))
                    .await
            }
            Some(resumed) => {
                let nested = nested_resume(ctx.name(), resumed)?;
                let hold = ctx
                    .answered_interrupt()
                    .and_then(|d| d.get(SUBAGENT))
                    .and_then(|v| SurfacedHold::deserialize(v).ok())
                    .ok_or_else(|| {
                        Error::FailedPrecondition(format!(
                            "sub-agent call \"{}\" was not paused by its child: nothing to resume",
                            ctx.name()
                        ))
                    })?;
                if hold.agent != self.agent.name() {
                    return Err(Error::FailedPrecondition(format!(
                        "sub-agent call \"{}\" paused in agent \"{}\", not \"{}\"",
                        ctx.name(),
                        hold.agent,
                        self.agent.name()
                    )));
                }
                let child = hold.snapshot_id.clone();
                let init = AgentInit::snapshot(hold.snapshot_id);
                // The caller answered this call, not the child's snapshot:
                // a lost race for the child names the call first.
                self.run_child(ctx, init, AgentInput::resume(nested))
                    .await
                    .map_err(|e| match e {
                        Error::AlreadyResumed(id) if id == child => Error::AlreadyAnswered(format!(
                            "sub-agent call \"{}\" was already resumed (agent \"{}\", snapshot {child})",
                            ctx.name(),
                            self.agent.name()
                        )),
                        other => other,
                    })
            }
        };
        self.outcome(result)
    }

    fn check_output(&self, _output: &Value) -> Result<()> {
        Ok(())
    }

    fn check_resume(&self, resumed: &Map<String, Value>) -> Result<()> {
        nested_resume(&self.definition.name, resumed).map(|_| ())
    }
}
