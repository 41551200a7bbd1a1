//! The commands that read: sessions, paused calls, calls in doubt, the
//! audit trail, each as a table or JSON.

use serde_json::Value;

use super::show::{audited_input, json_name, may_answer, or_dash, rows};
use crate::args::{AuditArgs, ListArgs};
use crate::backend::{Backend, pending_of};
use crate::error::CliError;
use crate::output::{Table, count, cut, print, print_json, time, with_progress};

/// `sessions list`: sessions, newest first.
pub(super) async fn sessions_list(
    backend: &Backend,
    agent: Option<&str>,
    list: ListArgs,
    json: bool,
) -> Result<(), CliError> {
    let snapshots = with_progress(
        "reading snapshots…",
        backend.snapshots(agent, list.limit.saturating_mul(20)),
    )
    .await?;
    let n = snapshots.len();
    let mut sessions = rows(snapshots);
    sessions.truncate(list.limit);
    count(&format!("{} sessions from {n} snapshots", sessions.len()));
    if json {
        return Ok(print_json(&sessions)?);
    }
    let mut t = Table::new(vec![
        "SESSION",
        "AGENT",
        "STATUS",
        "WAITING",
        "UPDATED",
        "SNAPSHOTS",
        "LATEST SNAPSHOT",
    ]);
    for s in &sessions {
        let status = match &s.finish_reason {
            Some(f) => format!("{} ({f})", s.status),
            None => s.status.clone(),
        };
        t.row(vec![
            s.session_id.clone(),
            or_dash(s.agent.as_deref()),
            status,
            if s.waiting { "yes".into() } else { "no".into() },
            time(s.updated_at),
            s.snapshots.to_string(),
            s.latest_snapshot_id.clone(),
        ]);
    }
    Ok(print(&t.render("no sessions"))?)
}

/// `sessions show`: one session's latest snapshot, its messages and what it waits for.
pub(super) async fn sessions_show(
    backend: &Backend,
    agent: Option<&str>,
    session: &str,
    json: bool,
) -> Result<(), CliError> {
    let s = backend.session(session, agent).await?.as_read();
    if json {
        return Ok(print_json(&s)?);
    }
    let mut text = format!(
        "session   {}\nagent     {}\nsnapshot  {}\nstatus    {}{}\nupdated   {}\n",
        s.session_id,
        or_dash(s.agent.as_deref()),
        s.snapshot_id,
        s.status.as_str(),
        s.finish_reason
            .map(|f| format!(" ({})", json_name(&f)))
            .unwrap_or_default(),
        time(s.updated_at),
    );
    if let Some(state) = &s.state {
        text.push_str("\nmessages\n");
        for m in &state.messages {
            let mut what = m.text();
            for p in &m.content {
                if let Some(r) = p.as_tool_request() {
                    what.push_str(&format!(
                        " [calls {}({})]",
                        r.name,
                        r.input.clone().unwrap_or(Value::Null)
                    ));
                }
                if let Some(r) = p.as_tool_response() {
                    what.push_str(&format!(" [{} → {}]", r.name, r.output.clone().unwrap_or(Value::Null)));
                }
            }
            text.push_str(&format!("  {:<6} {}\n", json_name(&m.role), cut(what.trim(), 160)));
        }
    }
    if s.is_waiting() {
        text.push_str("\nwaiting for an answer\n");
        for p in pending_of(&s) {
            text.push_str(&format!("  {p}\n"));
        }
    }
    Ok(print(&text)?)
}

/// `pending`: the paused calls waiting for an answer.
pub(super) async fn pending(
    backend: &Backend,
    agent: Option<&str>,
    list: ListArgs,
    json: bool,
) -> Result<(), CliError> {
    let items = with_progress("reading paused calls…", backend.pending(agent, list.limit)).await?;
    if json {
        return Ok(print_json(&items)?);
    }
    let mut t = Table::new(vec![
        "SNAPSHOT",
        "REF",
        "AGENT",
        "TOOL",
        "HELD SINCE",
        "BY",
        "WHAT",
        "INPUT",
        "ASKS",
        "MAY ANSWER",
        "APPROVALS",
    ]);
    for p in &items {
        let by = match p.interrupted_by.as_deref() {
            Some(m) => m.to_owned(),
            None => "tool".to_owned(),
        };
        let expired = if p.expired { " (expired)" } else { "" };
        t.row(vec![
            p.snapshot_id.clone(),
            or_dash(p.reference.as_deref()),
            or_dash(p.agent.as_deref()),
            p.tool.clone(),
            format!("{}{expired}", time(p.held_since)),
            by,
            match &p.unapprovable {
                Some(_) => cut(&format!("{} (deny or edit only)", p.summary()), 60),
                None => cut(&p.summary(), 48),
            },
            cut(&p.input.to_string(), 48),
            cut(&Value::Object(p.interrupt.clone()).to_string(), 60),
            may_answer(p),
            p.rule.as_ref().map_or_else(|| "-".to_owned(), |_| p.tally()),
        ]);
    }
    Ok(print(&t.render("no paused calls"))?)
}

/// `in-doubt`: calls whose resume died mid-run, and how to settle them.
pub(super) async fn in_doubt(
    backend: &Backend,
    agent: Option<&str>,
    list: ListArgs,
    json: bool,
) -> Result<(), CliError> {
    let items = with_progress("reading calls in doubt…", backend.in_doubt(agent, list.limit)).await?;
    if json {
        return Ok(print_json(&items)?);
    }
    let mut t = Table::new(vec!["SNAPSHOT", "REF", "AGENT", "TOOL", "INPUT", "DECIDED"]);
    for p in &items {
        let decided = p
            .decided
            .first()
            .map(|r| {
                format!(
                    "{} by {} at {}",
                    r.decision.as_str(),
                    or_dash(r.principal.as_deref()),
                    time(r.at)
                )
            })
            .unwrap_or_else(|| "-".into());
        t.row(vec![
            p.snapshot_id.clone(),
            or_dash(p.reference.as_deref()),
            or_dash(p.agent.as_deref()),
            p.tool.clone(),
            cut(&p.input.to_string(), 48),
            decided,
        ]);
    }
    let mut text = t.render("no calls in doubt");
    if !items.is_empty() {
        text.push_str(
            "\nEach may or may not have run. Check the real system, then `holdpoint settle SNAPSHOT REF --output JSON` (what it did) or `--rerun`.\n",
        );
    }
    Ok(print(&text)?)
}

/// `audit`: the decisions recorded, newest first.
pub(super) async fn audit(backend: &Backend, agent: Option<&str>, a: AuditArgs, json: bool) -> Result<(), CliError> {
    let records = with_progress(
        "reading the audit trail…",
        backend.audit(agent, a.session.as_deref(), a.limit),
    )
    .await?;
    if json {
        return Ok(print_json(&records)?);
    }
    let mut t = Table::new(vec![
        "AT",
        "DECISION",
        "AGENT",
        "TOOL",
        "REF",
        "SNAPSHOT",
        "PRINCIPAL",
        "ACTOR",
        "REASON",
        "INPUT",
    ]);
    for r in &records {
        t.row(vec![
            time(r.at),
            r.decision.as_str().to_owned(),
            or_dash(r.agent.as_deref()),
            r.tool.clone(),
            or_dash(r.reference.as_deref()),
            r.snapshot_id.clone(),
            or_dash(r.principal.as_deref()),
            or_dash(r.actor.as_deref()),
            or_dash(r.reason.as_deref()),
            audited_input(r),
        ]);
    }
    Ok(print(&t.render("no decisions recorded"))?)
}
