//! One function per command: ask the backend, print a table or JSON.

mod show;
#[cfg(test)]
mod tests;

use holdpoint::agent::Agent;
use serde_json::Value;

use crate::args::{Cli, Command, McpCommand, SessionsCommand};
use crate::backend::{Backend, Decision, pending_of};
use crate::error::CliError;
use crate::output::{Table, count, cut, print, print_json, time, with_progress};

pub use show::SessionRow;
use show::{audited_input, decided, json_name, may_answer, or_dash, outcome, rows};

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
        Command::Approve(d) if d.grant.grant.is_some() && d.input.is_some() => Err(CliError::Usage(
            "--grant and --input do not go together: a grant covers calls like the one held, not an edited one".into(),
        )),
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
        Command::Deny(d) if d.input.is_some() => Err(CliError::Usage(
            "--input goes with approve (an edited call to run), not deny".into(),
        )),
        Command::Approve(d) => {
            let (decision, what) = match &d.input {
                Some(raw) => (
                    Decision::ApproveEdited {
                        input: edited_input(raw)?,
                        reason: d.reason,
                    },
                    "approved with the edited input",
                ),
                None => (Decision::Approve(d.reason), "approved"),
            };
            outcome(
                cli.json,
                backend
                    .decide(
                        &d.snapshot,
                        &backend.call_ref(&d.snapshot, d.reference.as_deref()).await?,
                        &decision,
                    )
                    .await?,
                what,
            )
        }
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
        Command::Receipt(r) => crate::receipt::run(r, cli.json).await,
    }
}

/// The edited input of `approve --input`: a JSON value, or a usage error
/// that shows how to quote it.
fn edited_input(raw: &str) -> Result<Value, CliError> {
    serde_json::from_str::<Value>(raw).map_err(|e| {
        CliError::Usage(format!(
            "--input is not valid JSON ({e}): quote it, e.g. --input '{{\"amount\": 400, \"toAccount\": \"savings\"}}'"
        ))
    })
}
