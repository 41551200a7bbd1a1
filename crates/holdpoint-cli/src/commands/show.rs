//! What the commands print: the session rows of `sessions list`, the
//! cells of the pending and audit tables, and the outcome of an answer.

use std::collections::BTreeMap;

use holdpoint::agent::AgentOutput;
use holdpoint::session::{AuditRecord, Snapshot};
use serde::Serialize;
use serde_json::Value;

use crate::backend::Outcome;
use crate::error::CliError;
use crate::output::{cut, print, print_json};

/// A session as `sessions list` shows it: its latest snapshot.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// The session.
    pub session_id: String,
    /// The agent that wrote it.
    pub agent: Option<String>,
    /// Its latest snapshot.
    pub latest_snapshot_id: String,
    /// That snapshot's status.
    pub status: String,
    /// How its turn ended.
    pub finish_reason: Option<String>,
    /// Whether it waits for an answer.
    pub waiting: bool,
    /// When it was last written.
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// How many of its snapshots were read.
    pub snapshots: usize,
}

pub(super) fn rows(snapshots: Vec<Snapshot>) -> Vec<SessionRow> {
    let mut by_session: BTreeMap<String, SessionRow> = BTreeMap::new();
    for s in snapshots.into_iter().map(Snapshot::as_read) {
        let row = SessionRow {
            session_id: s.session_id.clone(),
            agent: s.agent.clone(),
            latest_snapshot_id: s.snapshot_id.clone(),
            status: s.status.as_str().to_owned(),
            finish_reason: s.finish_reason.map(|f| json_name(&f)),
            waiting: s.is_waiting(),
            updated_at: s.updated_at,
            snapshots: 1,
        };
        match by_session.get_mut(&row.session_id) {
            Some(r) => {
                let n = r.snapshots + 1;
                if row.updated_at > r.updated_at {
                    *r = row;
                }
                r.snapshots = n;
            }
            None => {
                by_session.insert(row.session_id.clone(), row);
            }
        }
    }
    let mut out: Vec<SessionRow> = by_session.into_values().collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.updated_at));
    out
}

pub(super) fn json_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The input column of an audit row: the start of its input hash, and
/// for a restart that replaced the input, the new input and the start of
/// the original's hash.
pub(super) fn audited_input(r: &AuditRecord) -> String {
    let short = |h: &str| h.chars().take(12).collect::<String>();
    match (&r.input, &r.original_input_hash) {
        (Some(input), Some(original)) => format!(
            "{} {} (replaced {})",
            short(&r.input_hash),
            cut(&input.to_string(), 48),
            short(original)
        ),
        _ => short(&r.input_hash),
    }
}

pub(super) fn or_dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_owned()
}

/// Who may answer a paused call: its rule's approver roles (and the owner
/// when self-approval is on), else the session's owner.
pub(super) fn may_answer(p: &holdpoint::agent::PendingApproval) -> String {
    let owner = p.owner.as_deref().unwrap_or("the owner");
    match &p.rule {
        Some(rule) if rule.self_approval => format!("{} or {owner}", rule.approvers.join(", ")),
        Some(rule) => format!("{} (not {owner})", rule.approvers.join(", ")),
        None => owner.to_owned(),
    }
}

/// Prints what an approval or a denial did: the resumed turn, or `1 of 2
/// approvals recorded` while the quorum is not met.
pub(super) fn outcome(json: bool, out: Outcome, what: &str) -> Result<(), CliError> {
    match out {
        Outcome::Resumed(out) => decided(json, *out, what),
        Outcome::Recorded {
            approvals,
            quorum,
            counted,
        } => {
            if json {
                return Ok(print_json(&serde_json::json!({
                    "decided": false,
                    "counted": counted,
                    "quorum": quorum,
                    "approvals": approvals,
                }))?);
            }
            let who: Vec<&str> = approvals.iter().map(|a| a.actor.as_str()).collect();
            let mut text = format!("{} of {quorum} approvals recorded ({})", who.len(), who.join(", "));
            if !counted {
                text.push_str("; you had approved already, which counts once");
            }
            text.push_str("; the call runs once the quorum is met\n");
            Ok(print(&text)?)
        }
    }
}

pub(super) fn decided(json: bool, out: AgentOutput, what: &str) -> Result<(), CliError> {
    let failed = out.is_failed().then(|| match &out.error {
        Some(e) => format!("{}: {}", json_name(&e.status), e.message),
        None => "no error given".to_owned(),
    });
    if json {
        print_json(&out)?;
        return failed.map_or(Ok(()), |f| Err(CliError::TurnFailed(f)));
    }
    let mut text = format!(
        "{what}; the resumed turn ended: {} (snapshot {})\n",
        json_name(&out.finish_reason),
        out.snapshot_id.as_deref().unwrap_or("-")
    );
    let reply = out.text();
    if !reply.trim().is_empty() {
        text.push_str(&format!("{}\n", reply.trim()));
    }
    if let Some(e) = &out.error {
        text.push_str(&format!("error: {}: {}\n", json_name(&e.status), e.message));
    }
    if !out.interrupts().is_empty() {
        text.push_str("it paused again: see `holdpoint pending`\n");
    }
    print(&text)?;
    failed.map_or(Ok(()), |f| Err(CliError::TurnFailed(f)))
}
