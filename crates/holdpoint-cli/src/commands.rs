//! One function per command: ask the backend, print a table or JSON.

use std::collections::BTreeMap;

use holdpoint::agent::{Agent, AgentOutput};
use holdpoint::session::{AuditRecord, Snapshot};
use serde::Serialize;
use serde_json::Value;

use crate::args::{Cli, Command, McpCommand, SessionsCommand};
use crate::backend::{Backend, Decision, Outcome, pending_of};
use crate::error::CliError;
use crate::output::{Table, count, cut, print, print_json, time, with_progress};

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

fn rows(snapshots: Vec<Snapshot>) -> Vec<SessionRow> {
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

fn json_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The input column of an audit row: the start of its input hash, and
/// for a restart that replaced the input, the new input and the start of
/// the original's hash.
fn audited_input(r: &AuditRecord) -> String {
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

fn or_dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_owned()
}

/// Runs the parsed command line against `backend`.
pub async fn dispatch(cli: Cli, backend: Backend, agents: Vec<Agent>) -> Result<(), CliError> {
    let agent = cli.agent.as_deref();
    match cli.command {
        Command::Sessions(SessionsCommand::List(list)) => {
            let snapshots = with_progress(
                "reading snapshots…",
                backend.snapshots(agent, list.limit.saturating_mul(20)),
            )
            .await?;
            let n = snapshots.len();
            let mut sessions = rows(snapshots);
            sessions.truncate(list.limit);
            count(&format!("{} sessions from {n} snapshots", sessions.len()));
            if cli.json {
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
        Command::Sessions(SessionsCommand::Show { session }) => {
            let s = backend.session(&session, agent).await?.as_read();
            if cli.json {
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
        Command::Sessions(SessionsCommand::Abort { snapshot }) => {
            let previous = backend.abort(&snapshot, agent).await?;
            if cli.json {
                return Ok(print_json(
                    &serde_json::json!({ "snapshotId": snapshot, "previousStatus": previous }),
                )?);
            }
            Ok(print(&format!("aborted snapshot {snapshot} (it was {previous})\n"))?)
        }
        Command::Pending(list) => {
            let items = with_progress("reading paused calls…", backend.pending(agent, list.limit)).await?;
            if cli.json {
                return Ok(print_json(&items)?);
            }
            let mut t = Table::new(vec![
                "SNAPSHOT",
                "REF",
                "AGENT",
                "TOOL",
                "HELD SINCE",
                "BY",
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
                    cut(&p.input.to_string(), 48),
                    cut(&Value::Object(p.interrupt.clone()).to_string(), 60),
                    may_answer(p),
                    p.rule.as_ref().map_or_else(|| "-".to_owned(), |_| p.tally()),
                ]);
            }
            Ok(print(&t.render("no paused calls"))?)
        }
        Command::InDoubt(list) => {
            let items = with_progress("reading calls in doubt…", backend.in_doubt(agent, list.limit)).await?;
            if cli.json {
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
        Command::Settle(a) => {
            let output = a
                .output
                .as_deref()
                .map(|raw| {
                    serde_json::from_str::<Value>(raw).map_err(|e| {
                        CliError::Usage(format!(
                            "--output is not valid JSON ({e}): quote it, e.g. --output '{{\"success\": true}}'"
                        ))
                    })
                })
                .transpose()?;
            let what = if output.is_some() { "settled" } else { "re-run" };
            decided(
                cli.json,
                backend
                    .settle(
                        &a.snapshot,
                        &backend.call_ref(&a.snapshot, a.reference.as_deref()).await?,
                        output,
                    )
                    .await?,
                what,
            )
        }
        Command::Approve(d) if d.grant.grant.is_some() => {
            let grant = d
                .grant
                .request()?
                .ok_or_else(|| CliError::Usage("--grant needs a scope".into()))?;
            let reference = backend.call_ref(&d.snapshot, d.reference.as_deref()).await?;
            crate::grants::approve(&backend, &d.snapshot, &reference, d.reason, grant, cli.json).await
        }
        Command::Deny(d) if d.grant.grant.is_some() => {
            Err(CliError::Usage("--grant goes with approve, not deny".into()))
        }
        Command::Grants(g) => crate::grants::run(g, &backend, cli.agent.as_deref(), cli.json).await,
        Command::Approve(d) => outcome(
            cli.json,
            backend
                .decide(
                    &d.snapshot,
                    &backend.call_ref(&d.snapshot, d.reference.as_deref()).await?,
                    &Decision::Approve(d.reason),
                )
                .await?,
            "approved",
        ),
        Command::Deny(d) => outcome(
            cli.json,
            backend
                .decide(
                    &d.snapshot,
                    &backend.call_ref(&d.snapshot, d.reference.as_deref()).await?,
                    &Decision::Deny(d.reason),
                )
                .await?,
            "denied",
        ),
        Command::Answer(a) => {
            let mut data = serde_json::json!({"action": a.action});
            if let Some(content) = &a.content {
                let content: Value = serde_json::from_str(content).map_err(|e| {
                    CliError::Usage(format!(
                        "--content is not valid JSON ({e}): quote it, e.g. --content '{{\"name\": \"Ada\"}}'"
                    ))
                })?;
                if !content.is_object() || a.action != "accept" {
                    return Err(CliError::Usage(
                        "--content takes a JSON object, and only with --action accept".into(),
                    ));
                }
                data["content"] = content;
            }
            decided(
                cli.json,
                backend
                    .answer_directly(
                        &a.snapshot,
                        &backend.call_ref(&a.snapshot, a.reference.as_deref()).await?,
                        &Decision::Restart(data),
                    )
                    .await?,
                "answered",
            )
        }
        Command::Mcp(McpCommand::List { config }) => crate::mcp::list(&config, cli.json).await,
        Command::Respond(r) => {
            let output: Value = serde_json::from_str(&r.output).map_err(|e| {
                CliError::Usage(format!(
                    "--output is not valid JSON ({e}): quote it, e.g. --output '{{\"success\": true}}'"
                ))
            })?;
            decided(
                cli.json,
                backend
                    .answer_directly(
                        &r.snapshot,
                        &backend.call_ref(&r.snapshot, r.reference.as_deref()).await?,
                        &Decision::Respond(output),
                    )
                    .await?,
                "answered",
            )
        }
        Command::Audit(a) => {
            let records = with_progress(
                "reading the audit trail…",
                backend.audit(agent, a.session.as_deref(), a.limit),
            )
            .await?;
            if cli.json {
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
        Command::Notifications(c) => crate::notifications::run(c, cli.json, &backend).await,
        Command::Serve(s) => crate::serve::serve(s, cli.api_key, agents).await,
        Command::Prune(p) => crate::prune::prune(p, &backend, agent, cli.json).await,
    }
}

/// Who may answer a paused call: its rule's approver roles (and the owner
/// when self-approval is on), else the session's owner.
fn may_answer(p: &holdpoint::agent::PendingApproval) -> String {
    let owner = p.owner.as_deref().unwrap_or("the owner");
    match &p.rule {
        Some(rule) if rule.self_approval => format!("{} or {owner}", rule.approvers.join(", ")),
        Some(rule) => format!("{} (not {owner})", rule.approvers.join(", ")),
        None => owner.to_owned(),
    }
}

/// Prints what an approval or a denial did: the resumed turn, or `1 of 2
/// approvals recorded` while the quorum is not met.
fn outcome(json: bool, out: Outcome, what: &str) -> Result<(), CliError> {
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

fn decided(json: bool, out: AgentOutput, what: &str) -> Result<(), CliError> {
    if json {
        return Ok(print_json(&out)?);
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
    Ok(print(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint::session::{AuditDecision, hash_json};
    use serde_json::json;

    #[test]
    fn the_audit_input_column_shows_a_replaced_input_and_the_original_hash() {
        let (held, ran) = (
            json!({"amount": 500}),
            json!({"amount": 999999, "toAccount": "mallory"}),
        );
        let mut r = AuditRecord {
            id: "a".into(),
            at: chrono::Utc::now(),
            principal: None,
            actor: None,
            agent: None,
            session_id: "s".into(),
            snapshot_id: "p".into(),
            tool: "transferMoney".into(),
            reference: None,
            input_hash: hash_json(&held),
            input: None,
            original_input: None,
            original_input_hash: None,
            decision: AuditDecision::Approve,
            reason: None,
            held_by: None,
            settles: false,
            mcp: None,
            grant: None,
        };
        assert_eq!(audited_input(&r), hash_json(&held)[..12]);
        r.input_hash = hash_json(&ran);
        r.input = Some(ran.clone());
        r.original_input = Some(held.clone());
        r.original_input_hash = Some(hash_json(&held));
        let shown = audited_input(&r);
        assert!(shown.starts_with(&hash_json(&ran)[..12]), "{shown}");
        assert!(shown.contains("mallory"), "{shown}");
        assert!(
            shown.ends_with(&format!("(replaced {})", &hash_json(&held)[..12])),
            "{shown}"
        );
    }
}
