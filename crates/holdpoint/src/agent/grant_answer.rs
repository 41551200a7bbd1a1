//! The standing grant an approver asks for with an approval
//! (docs/reference.md §10.9): checked whole before anything is written,
//! stored once the approval resumed the hold.

use chrono::Utc;

use super::Agent;
use super::audit::PendingApproval;
use crate::approval::{Condition, Grant, GrantRequest, GrantScope};
use crate::error::{Error, Result};
use crate::session::mint_id;

/// The grant `request` asks for with an answer (`approve`) by `actor` to
/// `call`, held in session `session_id` owned by `owner`; refused, with
/// nothing written, when it could not stand in for the call's hold.
pub(super) fn prepare(
    agent: &Agent,
    request: &GrantRequest,
    call: &PendingApproval,
    approve: bool,
    actor: Option<&str>,
    roles: &[String],
) -> Result<Grant> {
    // A hold a sub-agent surfaced is its child's call: the grant is the
    // child agent's, given in the child's session (its rule gate reads it).
    let (grant_agent, grant_session) = match call.path.last() {
        Some(step) => (step.agent.clone(), step.session_id.clone()),
        None => (agent.name().to_owned(), call.session_id.clone()),
    };
    let now = Utc::now();
    let rule = grantable(call, approve)?;
    let granter_roles = granter_roles(rule, request, actor, roles)?;
    check_request(request)?;
    let expires_at = expiry(request, now)?;
    Ok(Grant {
        id: mint_id(),
        agent: grant_agent,
        tool: call.tool.clone(),
        scope: request.scope,
        session_id: grant_session,
        principal: call.owner.clone(),
        when: request.when.clone(),
        expires_at,
        uses_left: request.uses,
        used: 0,
        granted_by: actor.unwrap_or("operator").to_owned(),
        granter_roles,
        created_at: now,
        snapshot_id: call.snapshot_id.clone(),
        rule: Some(rule.clone()),
        revoked_at: None,
        revoked_by: None,
    })
}

/// The rule of `call` a grant could stand in for: an approval (not a
/// denial) of a call one approval of a rule decides, whose condition
/// evaluated, and that does not ask for approval itself.
fn grantable(call: &PendingApproval, approve: bool) -> Result<&crate::approval::HoldRule> {
    let tool = &call.tool;
    if !approve {
        return Err(Error::InvalidArgument(
            "a standing grant goes with an approval, not a denial".into(),
        ));
    }
    let Some(rule) = &call.rule else {
        return Err(Error::FailedPrecondition(format!(
            "no approval rule governs {tool}: a standing grant stands in for an approval rule's holds only"
        )));
    };
    if rule.quorum > 1 {
        return Err(Error::FailedPrecondition(format!(
            "approval rule \"{}\" needs {} approvals: a standing grant cannot stand in for them",
            rule.rule, rule.quorum
        )));
    }
    if rule.error.is_some() {
        return Err(Error::FailedPrecondition(format!(
            "approval rule \"{}\" could not evaluate its condition for this call: no standing grant from it",
            rule.rule
        )));
    }
    if call.reply.is_some() {
        return Err(Error::FailedPrecondition(format!(
            "{tool} asks for approval itself: answer each of its holds; no standing grant"
        )));
    }
    Ok(rule)
}

/// The granter's roles the grant carries: the rule's approver roles the
/// actor has (all of them for the agent's own process); a grant of scope
/// tool needs one.
fn granter_roles(
    rule: &crate::approval::HoldRule,
    request: &GrantRequest,
    actor: Option<&str>,
    roles: &[String],
) -> Result<Vec<String>> {
    // The granter's authority: an approver role the rule names, or (an
    // owner answering under self-approval) their own sessions only. The
    // agent's own process answers as every approver.
    let granter_roles: Vec<String> = match actor {
        None => rule.approvers.clone(),
        Some(_) => roles.iter().filter(|r| rule.approvers.contains(r)).cloned().collect(),
    };
    if granter_roles.is_empty() && request.scope == GrantScope::Tool {
        return Err(Error::PermissionDenied(format!(
            "approval rule \"{}\" refuses this grant: a grant of scope tool covers other people's calls and needs one of the approver roles ({}); as the session's owner, grant for your own sessions (scope session or principal)",
            rule.rule,
            rule.approvers.join(", ")
        )));
    }
    Ok(granter_roles)
}

/// The request's own fields: a condition that compiles, at least one use.
fn check_request(request: &GrantRequest) -> Result<()> {
    if let Some(when) = &request.when {
        Condition::compile(when).map_err(|e| Error::InvalidArgument(format!("grant condition: {e}")))?;
    }
    if request.uses == Some(0) {
        return Err(Error::InvalidArgument("a grant's uses must be at least 1".into()));
    }
    Ok(())
}

/// When a grant asked for at `now` expires (`None`: never).
fn expiry(request: &GrantRequest, now: chrono::DateTime<Utc>) -> Result<Option<chrono::DateTime<Utc>>> {
    Ok(match request.ttl {
        Some(ttl) => {
            let ttl = ttl.checked()?;
            let delta =
                chrono::TimeDelta::from_std(ttl).map_err(|e| Error::InvalidArgument(format!("grant ttl: {e}")))?;
            Some(now + delta)
        }
        None => None,
    })
}
