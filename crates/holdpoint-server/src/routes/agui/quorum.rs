//! One approval toward a quorum over AG-UI (docs/reference.md §19): a
//! resume cannot decide a hold whose rule needs several approvers, so a
//! plain approval of the one open call under such a rule is recorded
//! through [`Decisions::answer`], the same path `POST /agents/{name}/answer`
//! takes. Until the quorum is met the run ends with the same interrupt,
//! its `metadata.holdpoint.approvals` now naming this approver; the
//! approval that meets it resumes the turn, and the run reports that turn.

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{Agent, Answer, Answered, PendingApproval, TOOL_APPROVED};
use holdpoint::session::Snapshot;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::events::{self, Translator};
use super::resume::{EntryStatus, ResumeEntry};
use super::{Stream, input_schema, models_in};
use crate::auth::Identity;
use crate::routes::agents::TurnEvent;

/// The open call a resume approves toward its quorum: the only open call,
/// under a rule that needs more than one approver, answered `resolved`
/// with nothing but the approval (no edits, no resume data of its own).
pub(super) fn single_approval<'a>(open: &'a [PendingApproval], entries: &[ResumeEntry]) -> Option<&'a PendingApproval> {
    let ([call], [entry]) = (open, entries) else {
        return None;
    };
    if call.rule.as_ref()?.quorum <= 1 || entry.status != EntryStatus::Resolved {
        return None;
    }
    let plain = match &entry.payload {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => {
            map.is_empty() || (map.len() == 1 && map.get(TOOL_APPROVED) == Some(&Value::Bool(true)))
        }
        Some(_) => false,
    };
    plain.then_some(call)
}

/// Records `call`'s approval as `caller` and streams what came of it.
pub(super) async fn record(
    agent: Agent,
    caller: Identity,
    snapshot: Snapshot,
    call: &PendingApproval,
    thread: String,
    run: String,
) -> BoxStream<'static, Value> {
    let answer = Answer {
        reference: call.reference.clone(),
        tool: Some(call.tool.clone()),
        ..Answer::approve(snapshot.snapshot_id.clone())
    };
    let result = agent.decisions().answer(answer, caller.request_context()).await;
    let done = match result {
        Ok(Answered::Recorded { call, .. }) => {
            let m = models_in(Some(&snapshot)).saturating_sub(1);
            let interrupt = events::interrupt(&snapshot, m, &call, input_schema(&agent, &call).as_ref());
            let events = vec![
                events::run_started(&thread, &run),
                json!({
                    "type": "RUN_FINISHED",
                    "threadId": thread,
                    "runId": run,
                    "outcome": {"type": "interrupt", "interrupts": [interrupt]},
                }),
            ];
            return futures::stream::iter(events).boxed();
        }
        Ok(Answered::Resumed(output)) | Ok(Answered::Granted { output, .. }) => Ok(*output),
        Err(e) => Err(e),
    };
    // The decided turn ran inside `answer`: report its output as a run's.
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(TurnEvent::Done(done));
    drop(tx);
    Stream {
        agent,
        caller,
        thread,
        run,
        translator: Translator::new(models_in(Some(&snapshot)), true),
        events: rx,
    }
    .events()
}
