//! Answering one paused call as a person (docs/reference.md §10.7): who may
//! answer it, the quorum its rule needs, and the resume the deciding
//! answer makes.
//!
//! Invariants: nothing is written for an answer refused here; an approval
//! short of the quorum is written only by the compare-and-set of
//! [`record_approval`] (so only while the hold waits); the answer that
//! decides the hold resumes it through the ordinary claim, so of two
//! approvers completing a quorum at once exactly one resume runs.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::audit::{self, AuditContext, PendingApproval};
use super::decide::{self, Purpose};
use super::io::{AgentInput, AgentOutput};
use super::worker::actor_of;
use super::{ACTOR, Access, Agent, PRINCIPAL, load, principal_of};
use crate::approval::{Grant, GrantRequest, roles_of};
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::message::metadata::{TOOL_APPROVED, WITHDRAWN};
use crate::session::{HoldApproval, record_approval};

/// Yes or no.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerKind {
    /// Approve: the call runs once the rule's quorum is met.
    Approve,
    /// Deny: the call does not run; the model is told, with the reason.
    Deny,
    /// Withdraw: the session's owner takes back their own request before
    /// it is decided — also when the rule does not let them answer it. The
    /// call does not run; the model is told it was withdrawn; the audit
    /// records `withdraw`.
    Withdraw,
}

/// One person's answer to one paused call.
///
/// Given with [`Decisions::answer`](super::Decisions::answer) and the caller who
/// answers (a [`Caller`](super::Caller) with the roles an approval rule
/// names, or the session's owner); the same struct is the `data` of `POST
/// /agents/{name}/answer` and what `holdpoint approve` / `deny` send. The
/// README's "Approvers and quorum" runs a whole quorum with it.
///
/// ```
/// use holdpoint::agent::{Answer, AnswerKind};
/// use serde_json::json;
///
/// let yes = Answer::approve("snap-1").reference("ref-0"); // the ref only tells calls apart
/// let no = Answer::deny("snap-1", None);
/// assert_eq!(no.decision, AnswerKind::Deny);
/// // On the wire (the HTTP body's `data`):
/// assert_eq!(
///     serde_json::to_value(&yes).ok(),
///     Some(json!({"snapshotId": "snap-1", "ref": "ref-0", "decision": "approve"}))
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The held snapshot.
    pub snapshot_id: String,
    /// The paused call's ref (needed only to tell calls apart).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The paused call's tool (needed only to tell calls apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Approve or deny.
    pub decision: AnswerKind,
    /// Why (the model sees a denial's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// With an approval: "and don't ask again" — the standing grant to
    /// create (docs/reference.md §10.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRequest>,
}

impl Answer {
    /// An approval of the paused call of `snapshot_id`.
    pub fn approve(snapshot_id: impl Into<String>) -> Self {
        Answer {
            snapshot_id: snapshot_id.into(),
            reference: None,
            tool: None,
            decision: AnswerKind::Approve,
            reason: None,
            grant: None,
        }
    }

    /// A denial of the paused call of `snapshot_id`, with a reason the
    /// model is told (as [`ApprovalHold::deny`](crate::middleware::ApprovalHold::deny)
    /// takes it).
    pub fn deny(snapshot_id: impl Into<String>, reason: Option<&str>) -> Self {
        Answer {
            decision: AnswerKind::Deny,
            reason: reason.map(str::to_owned),
            ..Answer::approve(snapshot_id)
        }
    }

    /// The owner's withdrawal of their own paused call of `snapshot_id`.
    pub fn withdraw(snapshot_id: impl Into<String>) -> Self {
        Answer {
            decision: AnswerKind::Withdraw,
            ..Answer::approve(snapshot_id)
        }
    }

    /// The same answer with a reason (recorded in the audit; the model is
    /// told a denial's).
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same answer asking for a standing grant.
    pub fn grant(mut self, grant: GrantRequest) -> Self {
        self.grant = Some(grant);
        self
    }

    /// The same answer for the call with this ref.
    pub fn reference(mut self, reference: impl Into<String>) -> Self {
        self.reference = Some(reference.into());
        self
    }
}

/// What an answer did.
#[derive(Debug, Clone)]
pub enum Answered {
    /// An approval was recorded and the quorum is not met yet: the call,
    /// with the approvals so far (`counted` is false when this actor had
    /// approved before, which counts once).
    Recorded {
        /// The paused call as listings now show it.
        call: Box<PendingApproval>,
        /// Whether this approval was new.
        counted: bool,
    },
    /// The answer decided the hold and the session was resumed.
    Resumed(Box<AgentOutput>),
    /// An approval with a grant: the session was resumed and the grant
    /// stored.
    Granted {
        /// The resumed turn's output.
        output: Box<AgentOutput>,
        /// The grant created.
        grant: Box<Grant>,
    },
}

/// Answers one paused call: find it, check who may answer and how,
/// decode the answer, count it toward the quorum, and resume once
/// decided (module docs for the invariants).
pub(super) async fn answer(agent: &Agent, answer: Answer, context: Map<String, Value>) -> Result<Answered> {
    let store = agent.require_store()?;
    let roles = roles_of(&context);
    let principal = principal_of(&context);
    let access = Access::Caller {
        principal,
        roles: &roles,
    };
    let (snapshot, call) = find_call(agent, store.as_ref(), &answer, access).await?;
    let actor = actor_of(&context).map(str::to_owned);
    let owner = snapshot.owner.clone();
    let reason = authorise(&answer, &call, &snapshot, actor.as_deref(), &roles, principal)?;
    // Decode and validate the answer whole (at every sub-agent level)
    // before anything is recorded or claimed: a bad answer leaves the hold
    // answerable.
    let directive = directive(&answer, &call, reason.as_deref())?;
    let mut session = load::loaded(&agent.def, snapshot, owner.as_deref())?;
    let mut nested = Resume::from_parts(vec![directive.clone()]);
    agent.def.nesting.route(&session.state.messages, &mut nested)?;
    decide::check(&agent.def, &session, &nested, Purpose::Record, &context)
        .await
        .map_err(|e| explain_misfit(e, &call))?;
    let approve = answer.decision == AnswerKind::Approve;
    // The grant asked for is checked whole, and a store without grants
    // refused, before the answer resumes anything.
    let grant = match &answer.grant {
        Some(request) => Some((
            std::sync::Arc::clone(agent.require_grants()?),
            super::grant_answer::prepare(agent, request, &call, approve, actor.as_deref(), &roles)?,
        )),
        None => None,
    };
    if let (true, Some(rule), Some(actor)) = (approve, &call.rule, &actor)
        && rule.quorum > 1
    {
        let who = Voter {
            actor,
            owner: owner.as_deref(),
            quorum: rule.quorum,
        };
        match count(agent, agent.require_audit()?.as_ref(), &answer, &call, &session, who).await? {
            Tally::Short(recorded) => return Ok(recorded),
            // The approvals the compare-and-set saw, which may be newer
            // than the snapshot read above.
            Tally::Complete(approvals) => session.approvals = approvals,
        }
    }
    let input = AgentInput::resume(Resume::from_parts(vec![directive]));
    let mut run_context = context;
    match &owner {
        Some(o) => run_context.insert(PRINCIPAL.to_owned(), Value::String(o.clone())),
        None => run_context.remove(PRINCIPAL),
    };
    if let Some(actor) = actor {
        run_context.insert(ACTOR.to_owned(), Value::String(actor));
    }
    let out = agent.drive(session, input, run_context, None).await?;
    match grant {
        Some((grants, grant)) => {
            grants.insert_grant(grant.clone()).await?;
            Ok(Answered::Granted {
                output: Box::new(out),
                grant: Box::new(grant),
            })
        }
        None => Ok(Answered::Resumed(Box::new(out))),
    }
}

/// The waiting snapshot `answer` names (one the caller may see) and the
/// one paused call it answers: `NOT_FOUND` for a snapshot or call that is
/// not there, `ALREADY_RESUMED` once answered, and a refusal when the
/// snapshot holds several calls (answered together, by a resume).
pub(super) async fn find_call(
    agent: &Agent,
    store: &dyn crate::session::SessionStore,
    answer: &Answer,
    access: Access<'_>,
) -> Result<(crate::session::Snapshot, PendingApproval)> {
    let id = &answer.snapshot_id;
    let snapshot = store
        .get_snapshot(id)
        .await?
        .filter(|s| s.belongs_to(agent.name()) && access.sees(s))
        .ok_or_else(|| Error::NotFound(format!("snapshot {id} not found")))?;
    if !snapshot.is_waiting() {
        return Err(match snapshot.resumed_at {
            Some(_) => Error::AlreadyResumed(id.clone()),
            None => Error::FailedPrecondition(format!("snapshot {id} has no paused call waiting for an answer")),
        });
    }
    let mut calls = audit::pending_raw_of(&snapshot);
    let chosen: Vec<usize> = (0..calls.len())
        .filter(|&i| answer.reference.is_none() || names(answer.reference.as_deref(), calls[i].reference.as_deref()))
        .filter(|&i| answer.tool.as_ref().is_none_or(|t| &calls[i].tool == t))
        .collect();
    let at = match chosen.as_slice() {
        [one] => *one,
        [] => return Err(Error::NotFound(format!("snapshot {id} has no such paused call"))),
        _ => {
            return Err(Error::InvalidArgument(format!(
                "snapshot {id} holds {} paused calls: name one by ref",
                chosen.len()
            )));
        }
    };
    if calls.len() > 1 {
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} holds {} paused calls; a resume must answer them all together (POST /agents/NAME with a resume)",
            calls.len()
        )));
    }
    Ok((snapshot, calls.swap_remove(at)))
}

/// Whether the caller may give this answer to `call`: a withdrawal by the
/// owner, an answer by the rule's approvers (or the owner when no rule
/// governs it), a denial with the reason its rule needs, an approval of a
/// call that is approvable and not expired. The reason to record.
fn authorise(
    answer: &Answer,
    call: &PendingApproval,
    snapshot: &crate::session::Snapshot,
    actor: Option<&str>,
    roles: &[String],
    principal: Option<&str>,
) -> Result<Option<String>> {
    let id = &answer.snapshot_id;
    let owner = snapshot.owner.as_deref();
    let withdraw = answer.decision == AnswerKind::Withdraw;
    if withdraw {
        check_withdraw(answer, owner, actor, &call.tool, id)?;
    }
    match (&call.rule, actor) {
        _ if withdraw => {}
        (Some(rule), Some(actor)) => rule.may_answer(actor, owner, roles)?,
        (None, _) if !snapshot.visible_to(principal) => {
            return Err(Error::PermissionDenied(format!(
                "no approval rule governs {} of snapshot {id}: only the session's owner may answer it",
                call.tool
            )));
        }
        _ => {}
    }
    let approve = answer.decision == AnswerKind::Approve;
    let reason = answer.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    if answer.decision == AnswerKind::Deny
        && reason.is_none()
        && let Some(rule) = call.rule.as_ref().filter(|r| r.reason_required)
    {
        return Err(Error::InvalidArgument(format!(
            "approval rule \"{}\" needs a reason for a denial of {}",
            rule.rule, call.tool
        )));
    }
    if approve && let Some(why) = &call.unapprovable {
        return Err(Error::FailedPrecondition(format!(
            "{} of snapshot {id} cannot be approved as is: {why}",
            call.tool
        )));
    }
    if approve && call.expired {
        return Err(Error::FailedPrecondition(format!(
            "the hold of {} in snapshot {id} expired; it can no longer be approved",
            call.tool
        )));
    }
    Ok(if withdraw {
        Some(match reason {
            Some(r) => format!("withdrawn by the requester: {r}"),
            None => "withdrawn by the requester".to_owned(),
        })
    } else {
        reason.map(str::to_owned)
    })
}

/// The restart directive that carries the answer: the tool's own reply
/// shape when it declares one, else `{toolApproved, reason}`; a
/// withdrawal is marked.
pub(super) fn directive(answer: &Answer, call: &PendingApproval, reason: Option<&str>) -> Result<crate::message::Part> {
    let approve = answer.decision == AnswerKind::Approve;
    let data = match &call.reply {
        Some(shape) => shape.answer(approve, reason),
        None => {
            let mut data = Map::new();
            data.insert(TOOL_APPROVED.into(), Value::Bool(approve));
            if let Some(r) = reason {
                data.insert("reason".into(), json!(r));
            }
            data
        }
    };
    let mut directive = call.part.restart(Some(Value::Object(data)))?;
    if answer.decision == AnswerKind::Withdraw {
        directive.set_meta(WITHDRAWN, Value::Bool(true));
    }
    Ok(directive)
}

/// Who approves toward a quorum, for whose session.
struct Voter<'a> {
    actor: &'a str,
    owner: Option<&'a str>,
    quorum: u32,
}

/// Where an approval toward a quorum left the hold.
enum Tally {
    /// Short of the quorum: the approval is recorded, nothing resumes.
    Short(Answered),
    /// The quorum is met, with these approvals.
    Complete(Vec<HoldApproval>),
}

/// Records `who`'s approval of `call` with its audit row, by
/// compare-and-set on the waiting snapshot.
async fn count(
    agent: &Agent,
    store: &dyn crate::session::AuditStore,
    answer: &Answer,
    call: &PendingApproval,
    session: &load::Session,
    who: Voter<'_>,
) -> Result<Tally> {
    let id = &answer.snapshot_id;
    let approval = HoldApproval {
        tool: call.tool.clone(),
        reference: call.reference.clone(),
        actor: who.actor.to_owned(),
        at: chrono::Utc::now(),
    };
    let ctx = AuditContext {
        principal: who.owner,
        actor: Some(who.actor),
        agent: agent.name(),
        session_id: &session.state.session_id,
        snapshot_id: id,
    };
    // The row goes in with the approval it records, or not at all.
    let row = audit::partial_approval(&ctx, &call.part, answer.reason.clone()).map(|mut r| {
        r.mcp = agent.def.mcp_origin(&r.tool);
        r
    });
    let tally = record_approval(store, id, approval, who.quorum, row.into_iter().collect()).await?;
    if tally.complete {
        return Ok(Tally::Complete(tally.approvals));
    }
    let mut now = call.clone();
    now.approvals = tally.approvals;
    now.redact();
    Ok(Tally::Short(Answered::Recorded {
        call: Box::new(now),
        counted: tally.counted,
    }))
}

/// Refuses a withdrawal by anyone but the session's owner, or one that
/// asks for a grant.
fn check_withdraw(answer: &Answer, owner: Option<&str>, actor: Option<&str>, tool: &str, id: &str) -> Result<()> {
    if answer.grant.is_some() {
        return Err(Error::InvalidArgument(
            "a standing grant goes with an approval, not a withdrawal".into(),
        ));
    }
    match (owner, actor) {
        (Some(owner), Some(actor)) if owner == actor => Ok(()),
        _ => Err(Error::PermissionDenied(format!(
            "only the requester (the session's owner) may withdraw {tool} of snapshot {id}"
        ))),
    }
}

/// Whether the ref an answer names picks the listed call `listed`: the
/// same ref, or the ref of the sub-agent call that surfaced it (as the
/// root's output shows it; the listing's ref is then compound).
fn names(asked: Option<&str>, listed: Option<&str>) -> bool {
    match (asked, listed) {
        (Some(asked), Some(listed)) => {
            listed == asked
                || listed
                    .strip_prefix(asked)
                    .is_some_and(|rest| rest.starts_with(crate::message::metadata::REF_SEPARATOR))
        }
        (asked, listed) => asked == listed,
    }
}

/// A yes or no that does not decode for a tool's own question, said with
/// what to add: approve and deny fit a resumable tool's hold only when its
/// resume type declares how it means yes or no (docs/reference.md §10.8).
fn explain_misfit(error: Error, call: &PendingApproval) -> Error {
    match error {
        Error::InvalidArgument(m) if call.reply.is_none() && call.interrupted_by.is_none() => {
            Error::InvalidArgument(format!(
                "{m} ({} asks its own question and declares no approval reply, so approve and deny cannot answer it: implement ApprovalReply for its resume type and define it with .approval_reply(), or answer with its resume data (restart) or its output (respond))",
                call.tool
            ))
        }
        other => other,
    }
}
