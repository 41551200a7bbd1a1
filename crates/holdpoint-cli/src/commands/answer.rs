//! The commands that answer a paused or in-doubt call: approve, deny,
//! respond, answer (an MCP question), settle.

use serde_json::Value;

use super::show::{decided, outcome};
use crate::args::{AnswerArgs, DecideArgs, RespondArgs, SettleArgs};
use crate::backend::{Backend, Decision};
use crate::error::CliError;

/// `settle`: a call in doubt, with what it really did or run again.
pub(super) async fn settle(backend: &Backend, a: SettleArgs, json: bool) -> Result<(), CliError> {
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
        json,
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

/// `approve`, with the held input or an edited one.
pub(super) async fn approve(backend: &Backend, d: DecideArgs, json: bool) -> Result<(), CliError> {
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
        json,
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

/// `answer`: an MCP server's question, accepted (with content), declined or canceled.
pub(super) async fn answer(backend: &Backend, a: AnswerArgs, json: bool) -> Result<(), CliError> {
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
        json,
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

/// `respond`: the tool's output given in its place.
pub(super) async fn respond(backend: &Backend, r: RespondArgs, json: bool) -> Result<(), CliError> {
    let output: Value = serde_json::from_str(&r.output).map_err(|e| {
        CliError::Usage(format!(
            "--output is not valid JSON ({e}): quote it, e.g. --output '{{\"success\": true}}'"
        ))
    })?;
    decided(
        json,
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

/// The edited input of `approve --input`: a JSON value, or a usage error
/// that shows how to quote it.
fn edited_input(raw: &str) -> Result<Value, CliError> {
    serde_json::from_str::<Value>(raw).map_err(|e| {
        CliError::Usage(format!(
            "--input is not valid JSON ({e}): quote it, e.g. --input '{{\"amount\": 400, \"toAccount\": \"savings\"}}'"
        ))
    })
}
