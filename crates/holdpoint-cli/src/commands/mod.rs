//! One function per command: ask the backend, print a table or JSON.
//! [`dispatch`] routes; `read` holds the commands that read, `answer`
//! those that answer a call.

mod answer;
mod read;
mod show;
#[cfg(test)]
mod tests;

use holdpoint::agent::Agent;

use crate::args::{Cli, Command, McpCommand, SessionsCommand};
use crate::backend::{Backend, Decision};
use crate::error::CliError;
use crate::output::{print, print_json};

pub use show::SessionRow;
use show::outcome;

/// Runs the parsed command line against `backend`.
pub async fn dispatch(cli: Cli, backend: Backend, agents: Vec<Agent>) -> Result<(), CliError> {
    let agent = cli.agent.as_deref();
    match cli.command {
        Command::Sessions(SessionsCommand::List(list)) => read::sessions_list(&backend, agent, list, cli.json).await,
        Command::Sessions(SessionsCommand::Show { session }) => {
            read::sessions_show(&backend, agent, &session, cli.json).await
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
        Command::Pending(list) => read::pending(&backend, agent, list, cli.json).await,
        Command::InDoubt(list) => read::in_doubt(&backend, agent, list, cli.json).await,
        Command::Settle(a) => answer::settle(&backend, a, cli.json).await,
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
        Command::Approve(d) => answer::approve(&backend, d, cli.json).await,
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
        Command::Answer(a) => answer::answer(&backend, a, cli.json).await,
        Command::Mcp(McpCommand::List) => crate::mcp::list(cli.config.as_deref(), cli.json).await,
        Command::Respond(r) => answer::respond(&backend, r, cli.json).await,
        Command::Audit(a) => read::audit(&backend, agent, a, cli.json).await,
        Command::Notifications(c) => crate::notifications::run(c, cli.json, &backend).await,
        Command::Serve(s) => crate::serve::serve(s, cli.config.as_deref(), cli.api_key, agents).await,
        Command::Prune(p) => crate::prune::prune(p, &backend, agent, cli.json).await,
        Command::Receipt(r) => crate::receipt::run(r, cli.json).await,
    }
}
