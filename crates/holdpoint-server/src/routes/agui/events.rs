//! AG-UI events out of Holdpoint's stream: a run's chunks become text
//! and tool-call events, its end `RUN_FINISHED` (success or the interrupt
//! outcome) or `RUN_ERROR`.
//!
//! Ids are stable across the runs of a thread: a model message is
//! `msg-{m}` and its calls `call-{m}-{ref}`, where `m` counts the model
//! messages of the session before it, so the run that resumes a call
//! reports its result under the id the run that paused it streamed.

use std::collections::BTreeSet;

use holdpoint::agent::{AgentStreamChunk, PendingApproval};
use holdpoint::message::{Message, Part, Role, metadata};
use holdpoint::session::Snapshot;
use serde_json::{Map, Value, json};

use super::resume::{interrupt_id, response_schema};

/// The `custom` key marking a chunk a sub-agent streamed.
const SUBAGENT: &str = "subagent";

/// The number of model messages in `messages`.
pub(crate) fn model_messages(messages: &[Message]) -> usize {
    messages.iter().filter(|m| m.role == Role::Model).count()
}

/// The id of the text message of model message `m`.
fn message_id(m: usize) -> String {
    format!("msg-{m}")
}

/// The id of the call `segment` (its ref, or its tool's name) of model
/// message `m`.
pub(crate) fn call_id(m: usize, segment: &str) -> String {
    format!("call-{m}-{segment}")
}

/// `RUN_STARTED`.
pub(crate) fn run_started(thread: &str, run: &str) -> Value {
    json!({"type": "RUN_STARTED", "threadId": thread, "runId": run})
}

/// `RUN_ERROR` with a code (a Holdpoint status name or one of this
/// endpoint's contract codes).
pub(crate) fn run_error(code: &str, message: &str) -> Value {
    json!({"type": "RUN_ERROR", "code": code, "message": message})
}

/// A tool request streamed before its ref was known.
#[derive(Debug)]
struct Streamed {
    /// Its model message.
    m: usize,
    name: String,
    reference: Option<String>,
    input: Value,
    used: bool,
}

/// Turns one run's chunks into AG-UI events, keeping which text message
/// is open and which calls were announced.
///
/// A chunk's `index` counts the messages of the run's generation (model,
/// tool, model, …; a resume's starts with the answered calls' results),
/// which gives each chunk its model message; chunks without one (a custom
/// agent's) open a new model message after a tool chunk. A call is
/// announced (`TOOL_CALL_START`/`ARGS`/`END`) as soon as its ref is known:
/// when streamed with one, else with its result, or at the end of the run
/// for a call left paused.
#[derive(Debug)]
pub(crate) struct Translator {
    /// The model messages of the session before the run.
    base: usize,
    /// Whether the run is a resume (its generation starts with results).
    resume: bool,
    /// The model message of index-less chunks.
    current: Option<usize>,
    /// Whether the last chunk was a model chunk.
    in_model: bool,
    /// The open text message.
    open_text: Option<String>,
    /// The calls already announced.
    started: BTreeSet<String>,
    /// Tool requests streamed without a ref.
    streamed: Vec<Streamed>,
    /// The model messages whose text was streamed.
    texted: BTreeSet<usize>,
    /// The agent, whose redaction paths mask the calls' arguments
    /// (docs/reference.md §22.1).
    agent: Option<holdpoint::agent::Agent>,
}

impl Translator {
    /// A translator for a run on a session holding `models` model
    /// messages already; `resume` when the run answers paused calls.
    pub(crate) fn new(models: usize, resume: bool) -> Self {
        Translator {
            base: models,
            resume,
            current: if resume { models.checked_sub(1) } else { None },
            in_model: false,
            open_text: None,
            started: BTreeSet::new(),
            streamed: Vec::new(),
            texted: BTreeSet::new(),
            agent: None,
        }
    }

    /// The same translator masking the arguments of `agent`'s calls where
    /// its tools or rules redact them.
    pub(crate) fn masking(mut self, agent: &holdpoint::agent::Agent) -> Self {
        self.agent = Some(agent.clone());
        self
    }

    /// The model message a chunk of generation message `index` belongs
    /// to (a tool chunk: the model message whose calls it answers).
    fn ordinal(&mut self, index: Option<u32>, model: bool) -> usize {
        let Some(index) = index else {
            if model && !self.in_model {
                self.current = Some(self.current.map_or(self.base, |c| c + 1));
            }
            self.in_model = model;
            return self.current.unwrap_or(self.base);
        };
        let q = i64::from(index) - i64::from(self.resume);
        let offset = if model { q.div_euclid(2) } else { (q - 1).div_euclid(2) };
        let m = usize::try_from(self.base as i64 + offset).unwrap_or_default();
        self.current = Some(m);
        self.in_model = model;
        m
    }

    /// The model message the run's chunks reached last.
    pub(crate) fn last(&self) -> usize {
        match (self.current, self.in_model) {
            (Some(m), true) => m,
            (Some(m), false) => m + 1,
            (None, _) => self.base,
        }
    }

    /// The events of one chunk.
    pub(crate) fn chunk(&mut self, chunk: &AgentStreamChunk) -> Vec<Value> {
        let Some(generated) = &chunk.model_chunk else {
            return Vec::new();
        };
        // A sub-agent's own stream is not the root's messages; its holds
        // reach the client on the interrupt outcome.
        if generated.custom.as_ref().and_then(|c| c.get(SUBAGENT)).is_some() {
            return Vec::new();
        }
        let mut out = Vec::new();
        match generated.role {
            Some(Role::Model) => {
                let m = self.ordinal(generated.index, true);
                for part in &generated.content {
                    self.model_part(m, part, &mut out);
                }
            }
            Some(Role::Tool) => {
                self.close_text(&mut out);
                // The paused requests a turn announces: answered at the end.
                if generated.content.iter().all(|p| p.as_tool_request().is_some()) {
                    return out;
                }
                let m = self.ordinal(generated.index, false);
                for part in &generated.content {
                    self.tool_part(m, part, &mut out);
                }
            }
            _ => {}
        }
        out
    }

    fn model_part(&mut self, m: usize, part: &Part, out: &mut Vec<Value>) {
        if let Some(text) = part.as_text() {
            if text.is_empty() {
                return;
            }
            let id = message_id(m);
            self.texted.insert(m);
            if self.open_text.as_deref() != Some(id.as_str()) {
                self.close_text(out);
                out.push(json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}));
                self.open_text = Some(id.clone());
            }
            out.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text}));
            return;
        }
        let Some(req) = part.as_tool_request() else {
            return;
        };
        let input = req.input.clone().unwrap_or_else(|| Value::Object(Map::new()));
        match &req.reference {
            Some(r) => self.announce(m, r, &req.name, &input, out),
            None => self.streamed.push(Streamed {
                m,
                name: req.name.clone(),
                reference: None,
                input,
                used: false,
            }),
        }
    }

    /// `TOOL_CALL_START`, `ARGS` and `END` of a call of model message `m`
    /// not announced yet (a resume's answered calls were announced by the
    /// run that paused them).
    fn announce(&mut self, m: usize, segment: &str, name: &str, input: &Value, out: &mut Vec<Value>) {
        if m < self.base {
            return;
        }
        let id = call_id(m, segment);
        if !self.started.insert(id.clone()) {
            return;
        }
        self.close_text(out);
        out.push(json!({
            "type": "TOOL_CALL_START",
            "toolCallId": id,
            "toolCallName": name,
            "parentMessageId": message_id(m),
        }));
        let masked;
        let input = match self.agent.as_ref().and_then(|a| a.redaction_for(name)) {
            Some(redaction) => {
                let mut shown = input.clone();
                redaction.mask(&mut shown);
                masked = shown;
                &masked
            }
            None => input,
        };
        out.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": input.to_string()}));
        out.push(json!({"type": "TOOL_CALL_END", "toolCallId": id}));
    }

    /// The input a call streamed without a ref had: the first unclaimed
    /// request of its tool in its model message.
    fn streamed_input(&mut self, m: usize, name: &str, reference: Option<&str>) -> Value {
        self.streamed
            .iter_mut()
            .find(|s| {
                !s.used && s.m == m && s.name == name && (s.reference.is_none() || s.reference.as_deref() == reference)
            })
            .map(|s| {
                s.used = true;
                s.input.clone()
            })
            .unwrap_or_else(|| Value::Object(Map::new()))
    }

    /// A tool result of model message `m` (partial results are not).
    fn tool_part(&mut self, m: usize, part: &Part, out: &mut Vec<Value>) {
        let Some(resp) = part.as_tool_response() else {
            return;
        };
        if metadata::is_set(part.metadata.as_ref(), metadata::PARTIAL) {
            return;
        }
        let segment = resp.reference.as_deref().unwrap_or(&resp.name).to_owned();
        if !self.started.contains(&call_id(m, &segment)) && m >= self.base {
            let input = self.streamed_input(m, &resp.name, resp.reference.as_deref());
            self.announce(m, &segment, &resp.name, &input, out);
        }
        let content = match &resp.output {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "null".to_owned(),
        };
        out.push(json!({
            "type": "TOOL_CALL_RESULT",
            "messageId": format!("result-{m}-{segment}"),
            "toolCallId": call_id(m, &segment),
            "content": content,
            "role": "tool",
        }));
    }

    /// Announces the calls of the run's last model message, model message
    /// `m`, that were not (a run that paused: its paused calls).
    pub(crate) fn paused(&mut self, m: usize, message: &Message, out: &mut Vec<Value>) {
        for part in &message.content {
            let (Some(req), Some(segment)) = (part.as_tool_request(), part.ref_segment()) else {
                continue;
            };
            if self.started.contains(&call_id(m, segment)) {
                continue;
            }
            let input = req.input.clone().unwrap_or_else(|| Value::Object(Map::new()));
            self.streamed_input(m, &req.name, req.reference.as_deref());
            self.announce(m, segment, &req.name, &input, out);
        }
    }

    /// The text of the run's last model message, model message `m`, when
    /// the model did not stream it.
    pub(crate) fn final_text(&mut self, m: usize, message: &Message, out: &mut Vec<Value>) {
        let text = message.text();
        if text.is_empty() || self.texted.contains(&m) || m < self.base {
            return;
        }
        self.model_part(m, &Part::text(text), out);
        self.close_text(out);
    }

    /// Closes the open text message, if any.
    pub(crate) fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.open_text.take() {
            out.push(json!({"type": "TEXT_MESSAGE_END", "messageId": id}));
        }
    }
}

/// The hold's summary for people: the tool's preview summary, else the
/// interrupt's `message` or `details`, else the line built from the
/// (redacted) input.
fn summary(call: &PendingApproval) -> String {
    ["message", "details", "reason"]
        .iter()
        .find_map(|k| call.interrupt.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .filter(|_| call.preview.is_none())
        .unwrap_or_else(|| call.summary())
}

/// The AG-UI `Interrupt` of one paused call of `snapshot`, whose last
/// model message is model message `m` of its session.
pub(crate) fn interrupt(snapshot: &Snapshot, m: usize, call: &PendingApproval, input_schema: Option<&Value>) -> Value {
    let root_segment = call
        .path
        .first()
        .map(|step| step.reference.clone().unwrap_or_else(|| step.tool.clone()))
        .or_else(|| call.part.ref_segment().map(str::to_owned))
        .unwrap_or_else(|| call.tool.clone());
    let reason = if call.interrupted_by.is_some() || call.reply.is_some() {
        "tool_approval"
    } else {
        "input_required"
    };
    let mut holdpoint = json!({
        "snapshotId": snapshot.snapshot_id,
        "tool": call.tool,
        "input": call.input,
        "interrupt": call.interrupt,
    });
    if let Some(r) = &call.reference {
        holdpoint["ref"] = json!(r);
    }
    if let Some(by) = &call.interrupted_by {
        holdpoint["interruptedBy"] = json!(by);
    }
    if let Some(rule) = &call.rule {
        holdpoint["rule"] = json!(rule);
        holdpoint["approvals"] = json!(call.approvals);
    }
    if !call.path.is_empty() {
        holdpoint["path"] = json!(call.path);
    }
    if let Some(p) = &call.preview {
        holdpoint["preview"] = json!(p);
    }
    if let Some(why) = &call.unapprovable {
        holdpoint["unapprovable"] = json!(why);
    }
    let mut out = json!({
        "id": interrupt_id(&snapshot.snapshot_id, call),
        "reason": reason,
        "message": summary(call),
        "toolCallId": call_id(m, &root_segment),
        "responseSchema": response_schema(call, input_schema),
        "metadata": {"holdpoint": holdpoint},
    });
    if let Some(at) = call.expires_at {
        out["expiresAt"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    if let Some(step) = call.path.last() {
        out["subagentRunId"] = json!(step.session_id);
    }
    out
}
