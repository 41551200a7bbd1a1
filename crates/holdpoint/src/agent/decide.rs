//! The one decision path every answer takes (docs/reference.md §10.10):
//! resumes, `Decisions::answer`, settlements and nested answers to a
//! sub-agent's holds all come here before anything is claimed.
//!
//! Order, per level (the session's own calls, then each surfaced hold's
//! child, level by level):
//! 1. **decode and validate** — the directive answers a call that waits
//!    ([`validate_resume`]); restart data decodes as the tool's resume
//!    type; a respond output meets the tool's output schema; a replaced
//!    input meets its input schema;
//! 2. **authorise** — the acting person may answer each call (its rule's
//!    approver roles, self-approval, quorum; the owner for a call no rule
//!    governs; a settlement by the hold's approvers or an operator).
//!
//! Invariants: [`check`] only reads; when it fails nothing was claimed
//! or written at any level, and the call is still answerable. A child
//! resumed by its parent's call is not checked again (its parent checked
//! it, with the root's recorded approvals, before the root's claim).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::audit;
use super::load::Session;
use super::{AgentDef, worker::actor_of};
use crate::approval::{HoldRule, roles_of};
use crate::error::{Error, Result};
use crate::generate::{Resume, validate_resume};
use crate::message::surfaced::SurfacedHold;
use crate::message::{Message, Part, Role, metadata};
use crate::session::{AuditDecision, HoldApproval, Snapshot};
use crate::tool::SchemaValidator;

/// The role that may settle any call in doubt and read any audit row
/// (docs/reference.md §10.10).
pub const OPERATOR_ROLE: &str = "operator";

/// Who answers: the acting person (`None`: the agent's own process, which
/// answers as an operator) and their roles.
#[derive(Debug, Clone)]
pub(crate) struct Decider<'a> {
    actor: Option<&'a str>,
    roles: Vec<String>,
    settles: bool,
    /// Whether an approval must meet its rule's quorum now (a resume), or
    /// is one recorded toward it ([`Purpose::Record`]).
    counts_quorum: bool,
}

/// What an answer checked by [`check`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A resume: every approval meets its rule's quorum.
    Resume,
    /// A settlement of calls in doubt.
    Settle,
    /// One approval recorded toward a quorum (`Decisions::answer`): checked
    /// whole, its quorum counted once it completes.
    Record,
}

impl<'a> Decider<'a> {
    /// The person a request context names.
    pub(crate) fn of(context: &'a Map<String, Value>, purpose: Purpose) -> Self {
        Decider {
            actor: actor_of(context),
            roles: roles_of(context),
            settles: purpose == Purpose::Settle,
            counts_quorum: purpose == Purpose::Resume,
        }
    }

    /// A rule's timer answering (an expiry's denial): no person, so no
    /// person's authority to check.
    pub(crate) fn timer(purpose: Purpose) -> Self {
        Decider {
            actor: None,
            roles: Vec::new(),
            settles: purpose == Purpose::Settle,
            counts_quorum: purpose == Purpose::Resume,
        }
    }

    fn is_operator(&self) -> bool {
        self.actor.is_none() || self.roles.iter().any(|r| r == OPERATOR_ROLE)
    }

    /// Whether this person is the owner of a session owned by `owner`
    /// (anyone is, of an unowned session).
    fn owns(&self, owner: Option<&str>) -> bool {
        owner.is_none() || owner == self.actor
    }

    /// Refuses (`PERMISSION_DENIED`, naming the rule) an answer this
    /// person may not give to `target`, paused in a session owned by
    /// `owner`.
    fn authorise(&self, target: &Part, directive: &Part, owner: Option<&str>) -> Result<()> {
        let Some(actor) = self.actor else { return Ok(()) };
        if directive.as_tool_request().is_some() && SurfacedHold::is_surfaced(target) {
            // Restarting a sub-agent call answers its child's holds: each
            // is authorised at the child's level.
            return Ok(());
        }
        let rule = HoldRule::on(target);
        // The owner may withdraw their own request (a denial marked
        // withdrawn), whatever the rule lets them answer.
        if !self.settles
            && owner.is_some()
            && self.owns(owner)
            && audit::restart_decision(target, directive, chrono::Utc::now()).0 == AuditDecision::Withdraw
        {
            return Ok(());
        }
        if self.settles {
            // In doubt: the hold's approvers and operators settle; an
            // owner settles only what they could have answered.
            if self.is_operator() {
                return Ok(());
            }
            return match rule {
                Some(rule) => Ok(rule.may_answer(actor, owner, &self.roles)?),
                None if self.owns(owner) => Ok(()),
                None => Err(Error::PermissionDenied(format!(
                    "only the session's owner or an operator may settle {}",
                    tool_name(target)
                ))),
            };
        }
        match rule {
            Some(rule) => Ok(rule.may_answer(actor, owner, &self.roles)?),
            // A call no rule governs is its session owner's alone.
            None if self.owns(owner) || self.is_operator() => Ok(()),
            None => Err(Error::PermissionDenied(format!(
                "no approval rule governs {}: only the session's owner may answer it",
                tool_name(target)
            ))),
        }
    }
}

pub(crate) fn tool_name(part: &Part) -> &str {
    part.as_tool_request().map_or("the call", |r| r.name.as_str())
}

/// One level of a check: the session's messages, its owner, the tools
/// that answer its calls and the approvals recorded toward quorums.
pub(crate) struct Level<'a> {
    /// The agent whose session this is (`None`: a child this agent does
    /// not know as a sub-agent, whose answers are then authorised but not
    /// decoded against its tools).
    pub def: Option<&'a AgentDef>,
    pub messages: &'a [Message],
    pub owner: Option<&'a str>,
    /// Approvals recorded for this level's calls, by their ref at this
    /// level (the root's, and for a child those the root recorded under
    /// the compound ref).
    pub approvals: Vec<HoldApproval>,
}

/// Checks `resume` (already routed, see [`Nesting::route`](super::nesting::Nesting::route)) on `session`
/// of the agent `def`, for the person `context` names, before anything
/// is claimed. Returns the child snapshots the nested answers were
/// checked against (their resumes start from them).
pub(crate) async fn check(
    def: &AgentDef,
    session: &Session,
    resume: &Resume,
    purpose: Purpose,
    context: &Map<String, Value>,
) -> Result<Vec<Snapshot>> {
    let messages = &session.state.messages;
    validate_resume(messages, resume)?;
    // A nested run's holds are answered through the level above.
    def.nesting
        .check_direct(messages, purpose == Purpose::Settle, context)?;
    if def.nesting.resumed_by_parent(context) {
        // The parent checked these answers before its own claim.
        return Ok(Vec::new());
    }
    let decider = if session.by_timer {
        Decider::timer(purpose)
    } else {
        Decider::of(context, purpose)
    };
    let level = Level {
        def: Some(def),
        messages,
        owner: session.owner.as_deref(),
        approvals: session.approvals.clone(),
    };
    check_level(&level, resume, &decider)?;
    let mut read = Vec::new();
    if let Some(store) = &def.store {
        // What the caller named, for refusals about a child's hold.
        let caller = match &session.snapshot_id {
            Some(id) => format!("snapshot {id}"),
            None => format!("session {}", session.state.session_id),
        };
        let nesting = &def.nesting;
        nesting
            .check_below(store.as_ref(), &level, resume, &decider, &caller, &mut read)
            .await?;
    }
    Ok(read)
}

/// Checks one level's answers: decoded against its agent's tools (when
/// known) and authorised for `decider`, approvability and quorum included.
pub(crate) fn check_level(level: &Level<'_>, resume: &Resume, decider: &Decider<'_>) -> Result<()> {
    let now = chrono::Utc::now();
    check_all_answered(level.messages, resume)?;
    for directive in resume.restart.iter().chain(&resume.respond) {
        let Some(target) = audit::target_of(level.messages, directive) else {
            continue;
        };
        if let Some(def) = level.def {
            check_content(def, target, directive)?;
        }
        decider.authorise(target, directive, level.owner)?;
        if !decider.settles {
            check_approvable(target, directive, now)?;
        }
        if !decider.counts_quorum {
            continue;
        }
        check_quorum(level, target, directive, decider, now)?;
    }
    Ok(())
}

/// Refuses an answer that would let a call marked `unapprovable` run as
/// held (docs/reference.md §22.3): a respond, an approval or a plain
/// restart. A denial, a withdrawal or an edit (the revised call is held
/// and judged again) passes.
fn check_approvable(target: &Part, directive: &Part, now: chrono::DateTime<chrono::Utc>) -> Result<()> {
    let Some(why) = target.meta(metadata::UNAPPROVABLE).and_then(Value::as_str) else {
        return Ok(());
    };
    let runs_as_held = directive.as_tool_response().is_some()
        || matches!(
            audit::restart_decision(target, directive, now).0,
            AuditDecision::Approve | AuditDecision::Restart
        );
    if runs_as_held {
        return Err(Error::FailedPrecondition(format!(
            "{} cannot be approved as is: {why}",
            tool_name(target)
        )));
    }
    Ok(())
}

/// Refuses a resume that leaves a paused call of the latest model message
/// unanswered: every call must be answered together.
fn check_all_answered(messages: &[Message], resume: &Resume) -> Result<()> {
    let Some(pending) = messages.iter().rev().find(|m| m.role == Role::Model) else {
        return Ok(());
    };
    for part in pending.content.iter().filter(|p| p.is_interrupt()) {
        let Some(req) = part.as_tool_request() else { continue };
        let answered = resume
            .restart
            .iter()
            .chain(&resume.respond)
            .any(|d| audit::target_of(messages, d).is_some_and(|t| std::ptr::eq(t, part)));
        if !answered {
            return Err(Error::UnresolvedToolRequest {
                name: req.name.clone(),
                reference: req.reference.clone().unwrap_or_default(),
            });
        }
    }
    Ok(())
}

/// Decodes and validates one directive against the tool that answers it.
fn check_content(def: &AgentDef, target: &Part, directive: &Part) -> Result<()> {
    let Some(req) = target.as_tool_request() else {
        return Ok(());
    };
    let tool = def.runnable_tools.iter().find(|t| t.name() == req.name);
    if let Some(resp) = directive.as_tool_response() {
        if let Some(tool) = tool {
            let output = resp.output.clone().unwrap_or(Value::Null);
            tool.check_output(&output)
                .map_err(|e| named(&req.name, "respond output", e))?;
        }
        return Ok(());
    }
    let resumed = metadata::marker(directive.metadata.as_ref(), metadata::RESUMED)?
        .map(metadata::Marker::into_object)
        .unwrap_or_default();
    match target.interrupted_by() {
        // The tool's own interrupt: its resume type reads the data.
        None => {
            if let Some(tool) = tool {
                tool.check_resume(&resumed)
                    .map_err(|e| named(&req.name, "restart data", e))?;
            }
        }
        // A gate's hold: yes or no, as a boolean.
        Some(_) => {
            if let Some(v) = resumed.get(metadata::TOOL_APPROVED)
                && !v.is_boolean()
            {
                return Err(Error::InvalidArgument(format!(
                    "restart data of {}: \"{}\" must be true or false, got {v}",
                    req.name,
                    metadata::TOOL_APPROVED
                )));
            }
        }
    }
    if directive.meta(metadata::REPLACED_INPUT).is_some()
        && let Some(schema) = def
            .tools
            .iter()
            .find(|d| d.name == req.name)
            .and_then(|d| d.input_schema.clone())
    {
        let input = directive
            .as_tool_request()
            .and_then(|r| r.input.clone())
            .unwrap_or_else(|| Value::Object(Map::new()));
        SchemaValidator::new(schema)
            .check("input", &input)
            .map_err(|e| named(&req.name, "replaced input", e))?;
    }
    Ok(())
}

/// `error` said as being about `what` of a call of `tool`.
fn named(tool: &str, what: &str, error: Error) -> Error {
    match error {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{what} of {tool}: {m}")),
        other => other,
    }
}

/// Refuses an approval that would complete a rule's hold short of its
/// quorum (`FAILED_PRECONDITION`).
fn check_quorum(
    level: &Level<'_>,
    target: &Part,
    directive: &Part,
    decider: &Decider<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    let (Some(actor), Some(rule), Some(req)) = (decider.actor, HoldRule::on(target), target.as_tool_request()) else {
        return Ok(());
    };
    if directive.as_tool_request().is_none() || rule.quorum <= 1 {
        return Ok(());
    }
    if audit::restart_decision(target, directive, now).0 != AuditDecision::Approve {
        return Ok(());
    }
    let mut actors: BTreeSet<&str> = level
        .approvals
        .iter()
        .filter(|a| a.is_of(&req.name, req.reference.as_deref()))
        .map(|a| a.actor.as_str())
        .collect();
    actors.insert(actor);
    let needed = usize::try_from(rule.quorum).unwrap_or(usize::MAX);
    if actors.len() < needed {
        return Err(Error::FailedPrecondition(format!(
            "approval rule \"{}\" needs {} distinct approvals of {}; {} recorded with this one: record approvals one by one (Decisions::answer, POST /agents/NAME/answer)",
            rule.rule,
            rule.quorum,
            req.name,
            actors.len()
        )));
    }
    Ok(())
}
