//! Resume: validating restart/respond directives against the history, and
//! applying them to the paused model message.

use serde_json::{Map, Value};

use super::dispatch::{self, Dispatcher, PlannedCall};
use crate::error::{Error, Result};
use crate::message::resume::Resume;
use crate::message::{Message, Part, Role, json_eq, metadata};
use crate::middleware::RestartPlan;
use crate::tool::ToolOutcome;

fn key(name: &str, reference: Option<&str>) -> String {
    match reference {
        Some(r) => format!("\"{name}\" (ref {r})"),
        None => format!("\"{name}\" (no ref)"),
    }
}

fn same_call(part: &Part, name: &str, reference: Option<&str>) -> bool {
    part.as_tool_request()
        .is_some_and(|r| r.name == name && r.reference.as_deref() == reference)
}

/// Checks every directive against the history (docs/reference.md §5): it must answer a
/// paused request of the latest model message, by name and ref, and a
/// restart must keep the original input unless it declares the change.
pub fn validate(history: &[Message], resume: &Resume) -> Result<()> {
    let Some(pending_at) = history.iter().rposition(|m| m.role == Role::Model) else {
        return Err(Error::InvalidArgument(
            "nothing to resume: the session has no model message".into(),
        ));
    };
    let paused = Paused {
        pending: &history[pending_at],
        earlier: &history[..pending_at],
    };
    let mut seen: Vec<String> = Vec::new();
    for part in &resume.restart {
        let Some(req) = part.as_tool_request() else {
            return Err(Error::InvalidArgument(format!(
                "a restart directive must be a toolRequest part, got a {} part",
                part.kind.key()
            )));
        };
        let target = paused.waiting(&req.name, req.reference.as_deref())?;
        let call = key(&req.name, req.reference.as_deref());
        check_input(part, req.input.as_ref(), target, &call)?;
        once(&mut seen, call)?;
    }
    for part in &resume.respond {
        let Some(resp) = part.as_tool_response() else {
            return Err(Error::InvalidArgument(format!(
                "a respond directive must be a toolResponse part, got a {} part",
                part.kind.key()
            )));
        };
        paused.waiting(&resp.name, resp.reference.as_deref())?;
        once(&mut seen, key(&resp.name, resp.reference.as_deref()))?;
    }
    Ok(())
}

/// The model message a resume answers, and the history before it.
struct Paused<'a> {
    pending: &'a Message,
    earlier: &'a [Message],
}

impl Paused<'_> {
    /// The paused request part `name`/`reference` of the pending message;
    /// `INVALID_ARGUMENT` saying why when it is not there or not waiting.
    fn waiting(&self, name: &str, reference: Option<&str>) -> Result<&Part> {
        if let Some(p) = self.pending.content.iter().find(|p| same_call(p, name, reference)) {
            if !p.is_interrupt() {
                return Err(Error::InvalidArgument(format!(
                    "tool request {} is not waiting for an answer",
                    key(name, reference)
                )));
            }
            return Ok(p);
        }
        let in_earlier = self
            .earlier
            .iter()
            .filter(|m| m.role == Role::Model)
            .any(|m| m.content.iter().any(|p| same_call(p, name, reference)));
        Err(Error::InvalidArgument(if in_earlier {
            format!(
                "tool request {} is from an earlier turn which is no longer pending; only the latest model message can be resumed",
                key(name, reference)
            )
        } else {
            format!("tool request {} not found in session history", key(name, reference))
        }))
    }
}

/// A restart keeps the paused call's input, or declares the change with
/// `replacedInput` equal to the original.
fn check_input(directive: &Part, given: Option<&Value>, target: &Part, call: &str) -> Result<()> {
    let original = target
        .as_tool_request()
        .and_then(|r| r.input.as_ref())
        .unwrap_or(&Value::Null);
    match directive.meta(metadata::REPLACED_INPUT) {
        Some(declared) if !json_eq(declared, original) => Err(Error::InvalidArgument(format!(
            "restart of {call} declares replacedInput that is not the original input"
        ))),
        None if !json_eq(given.unwrap_or(&Value::Null), original) => Err(Error::InvalidArgument(format!(
            "restart of {call} has modified inputs; a changed input must be declared with replacedInput (restart_with_input)"
        ))),
        _ => Ok(()),
    }
}

/// Each call is answered at most once per resume.
fn once(seen: &mut Vec<String>, call: String) -> Result<()> {
    if seen.contains(&call) {
        return Err(Error::InvalidArgument(format!("tool request {call} is answered twice")));
    }
    seen.push(call);
    Ok(())
}

enum Action {
    Pending(Value),
    Expired(chrono::DateTime<chrono::Utc>),
    Respond(Part),
    Restart(usize),
}

/// What applying the directives produced.
pub(crate) enum Applied {
    /// Every call is answered: append this tool message and call the model.
    Continue(Message),
    /// A restarted call paused again; the last message was revised in place.
    Interrupted,
}

/// Applies validated directives to the last (model) message of `history`:
/// plans each paused call's action, runs the restarted calls, then writes
/// the answers back onto the message.
pub(crate) async fn apply(
    history: &mut Vec<Message>,
    resume: &Resume,
    dispatcher: &Dispatcher,
    index: u32,
) -> Result<Applied> {
    let Some(last) = history.last() else {
        return Err(Error::FailedPrecondition("cannot resume: the history is empty".into()));
    };
    if last.role != Role::Model || last.tool_requests().next().is_none() {
        return Err(Error::FailedPrecondition(
            "cannot resume: the last message must be a model message with tool requests".into(),
        ));
    }
    let now = chrono::Utc::now();
    let mut actions: Vec<Option<Action>> = Vec::with_capacity(last.content.len());
    let mut calls: Vec<PlannedCall> = Vec::new();
    for part in &last.content {
        actions.push(match part.as_tool_request() {
            Some(req) => Some(action(part, req, resume, dispatcher, now, &mut calls)?),
            None => None,
        });
    }
    // For restarts with a new input: the input run and the original, which
    // the paused part records once the calls ran (the calls move away).
    let mut replaced: Vec<Option<(Value, Value)>> = calls
        .iter()
        .map(|c| {
            c.plan
                .original_input
                .clone()
                .map(|original| (c.input.clone(), original))
        })
        .collect();
    // The calls' middleware sees the history as it was before the answers.
    let results = dispatch::run_all_lending(dispatcher, calls, index, history).await?;
    let Some(last) = history.last_mut() else {
        return Err(Error::FailedPrecondition("cannot resume: the history is empty".into()));
    };
    let mut responses: Vec<Option<Part>> = Vec::with_capacity(actions.len());
    let mut repaused = false;
    for (part, action) in last.content.iter_mut().zip(actions) {
        match action {
            Some(action) if part.as_tool_request().is_some() => {
                let response = answer(part, action, &mut replaced, &results);
                repaused |= response.is_none();
                responses.push(response);
            }
            Some(_) => {}
            None => responses.push(None),
        }
    }
    if repaused {
        // The calls that finished keep their output until the rest are
        // answered.
        for (part, resp) in last.content.iter_mut().zip(&responses) {
            if let Some(output) = resp
                .as_ref()
                .and_then(Part::as_tool_response)
                .and_then(|r| r.output.clone())
            {
                part.set_meta(metadata::PENDING_OUTPUT, output);
            }
        }
        return Ok(Applied::Interrupted);
    }
    let mut meta = Map::new();
    meta.insert(metadata::RESUMED.into(), Value::Bool(true));
    let mut message = Message::new(Role::Tool, responses.into_iter().flatten().collect());
    message.metadata = Some(meta);
    Ok(Applied::Continue(message))
}

/// What the resume does with the paused request `part` (`req`): a
/// restart is planned into `calls`.
fn action(
    part: &Part,
    req: &crate::message::ToolRequest,
    resume: &Resume,
    dispatcher: &Dispatcher,
    now: chrono::DateTime<chrono::Utc>,
    calls: &mut Vec<PlannedCall>,
) -> Result<Action> {
    let reference = req.reference.as_deref();
    let respond = resume.respond.iter().find(|p| {
        p.as_tool_response()
            .is_some_and(|r| r.name == req.name && r.reference.as_deref() == reference)
    });
    let restart = resume.restart.iter().find(|p| same_call(p, &req.name, reference));
    let expired = part.expires_at().filter(|t| *t <= now);
    // `pendingOutput` holds a finished call's output, which may itself be
    // null; a call still marked paused needs an answer regardless.
    let pending = part.meta(metadata::PENDING_OUTPUT).filter(|_| !part.is_interrupt());
    if let Some(pending) = pending {
        Ok(Action::Pending(pending.clone()))
    } else if let (Some(at), true) = (expired, respond.is_some() || restart.is_some()) {
        Ok(Action::Expired(at))
    } else if let Some(resp) = respond {
        let output = resp
            .as_tool_response()
            .and_then(|r| r.output.clone())
            .unwrap_or(Value::Null);
        dispatcher.tool(&req.name)?.check_output(&output)?;
        let mut answer = resp.clone();
        let marker = metadata::marker(resp.metadata.as_ref(), metadata::INTERRUPT_RESPONSE)?
            .map(|m| m.to_value())
            .unwrap_or(Value::Bool(true));
        answer.metadata = None;
        answer.set_meta(metadata::INTERRUPT_RESPONSE, marker);
        Ok(Action::Respond(answer))
    } else if let Some(directive) = restart {
        calls.push(planned_restart(part, req, directive, dispatcher)?);
        Ok(Action::Restart(calls.len() - 1))
    } else {
        Err(Error::UnresolvedToolRequest {
            name: req.name.clone(),
            reference: req.reference.clone().unwrap_or_default(),
        })
    }
}

/// The call a restart directive runs: the held input (or the declared
/// replacement), the stage that held it, and what it resumes with.
fn planned_restart(
    part: &Part,
    req: &crate::message::ToolRequest,
    directive: &Part,
    dispatcher: &Dispatcher,
) -> Result<PlannedCall> {
    let target_stage = match part.interrupted_by() {
        Some(label) => Some(dispatcher.chain.stage_of(label)?),
        None => None,
    };
    let resumed = metadata::marker(directive.metadata.as_ref(), metadata::RESUMED)?
        .map(metadata::Marker::into_object)
        .unwrap_or_default();
    if target_stage.is_none() {
        dispatcher.tool(&req.name)?.check_resume(&resumed)?;
    }
    // `validate` checked that the directive's input (or its declared
    // `replacedInput`) equals the paused call's input by value; the stored
    // original is what runs and is recorded, so a client that
    // re-serialised `500.0` as `500` changes neither the tool's input nor
    // its hash.
    let held = req.input.clone();
    let replaced = directive
        .meta(metadata::REPLACED_INPUT)
        .map(|_| held.clone().unwrap_or(Value::Null));
    let given = if replaced.is_some() {
        directive.as_tool_request().and_then(|r| r.input.clone())
    } else {
        held
    };
    // A request without input ran with `{}` (as in the main loop).
    let input = given.unwrap_or_else(|| Value::Object(Map::new()));
    let receipt = dispatcher
        .receipts
        .as_ref()
        .and_then(|_| crate::receipt::ReceiptBasis::of_restart(part, directive));
    Ok(PlannedCall {
        name: req.name.clone(),
        reference: req.reference.clone(),
        input,
        plan: RestartPlan {
            target_stage,
            resumed: Some(resumed),
            input_replaced: replaced.is_some(),
            original_input: replaced,
            interrupt: part.interrupt_data(),
            released_by_rule: part.interrupted_by() == Some(crate::hold::RULE_GATE),
            receipt,
            receipts: None,
        },
    })
}

/// Writes `action`'s outcome onto the paused request `part` and returns
/// the tool response it answers with; `None` when the restarted call
/// paused again (the part is marked paused anew).
fn answer(
    part: &mut Part,
    action: Action,
    replaced: &mut [Option<(Value, Value)>],
    results: &[dispatch::CallResult],
) -> Option<Part> {
    let (name, reference) = part.as_tool_request().map(|r| (r.name.clone(), r.reference.clone()))?;
    resolve(part);
    match action {
        Action::Pending(value) => {
            part.remove_meta(metadata::PENDING_OUTPUT);
            let mut resp = Part::tool_response(name, reference, Some(value));
            resp.set_meta(metadata::SOURCE, Value::String("pending".into()));
            Some(resp)
        }
        Action::Respond(answer) => Some(answer),
        Action::Expired(at) => {
            let msg = format!(
                "approval expired: the answer came after {}; the call was not run",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
            dispatch::response_part(&name, reference.as_deref(), &ToolOutcome::Failed(msg))
        }
        Action::Restart(i) => {
            if let Some((input, original)) = replaced[i].take() {
                if let Some(r) = part.as_tool_request_mut() {
                    r.input = Some(input);
                }
                part.set_meta(metadata::REPLACED_INPUT, original);
            }
            let result = &results[i];
            match &result.outcome {
                ToolOutcome::Interrupt(data) => {
                    dispatch::mark_interrupt(part, std::borrow::Cow::Borrowed(data), result.held_by.as_ref());
                    None
                }
                outcome => dispatch::response_part(&name, reference.as_deref(), outcome),
            }
        }
    }
}

/// Moves `interrupt` to `resolvedInterrupt` on a request part.
fn resolve(part: &mut Part) {
    if let Some(old) = part
        .remove_meta(metadata::INTERRUPT)
        .filter(|v| !matches!(v, Value::Null | Value::Bool(false)))
    {
        part.set_meta(metadata::RESOLVED_INTERRUPT, old);
    }
}
