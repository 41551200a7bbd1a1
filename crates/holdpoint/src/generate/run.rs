//! The loop's course: a resume first, then iterations until
//! the model answers, a call pauses, or `max_turns` is hit; on a failure
//! the history as it stood at the last seam is handed to the seam hook.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::message::Message;
use crate::middleware::{Chain, IterationFn, IterationInfo};
use crate::model::Usage;

use super::dispatch::{Dispatcher, Toolset};
use super::iteration::{Loop, Step, iteration};
use super::{Caller, GenerateOptions, Generation, Resume, resume};

pub(super) async fn run(
    options: GenerateOptions,
    resume: Option<&Resume>,
    tools: Arc<Toolset>,
    caller: Caller,
) -> Result<Generation> {
    let keep_request = caller == Caller::Generate;
    let mut lp = Loop {
        model: options.model,
        system: options.system,
        config: options.config,
        dispatcher: Dispatcher {
            tools,
            chain: Chain::new(&options.middleware),
            sink: options.chunks,
            context: options.context,
            receipts: options.receipts,
        },
        usage: Usage::default(),
        index: 0,
        last_request: None,
        keep_request,
        message_in_history: caller == Caller::Turn,
        seam: None,
    };
    let mut history = options.messages;
    let on_seam = options.on_seam;
    let result = run_loop(&mut lp, &mut history, resume, options.max_turns, caller).await;
    if result.is_err()
        && let (Some(hook), Some(at)) = (on_seam, lp.seam)
        && let Some(kept) = history.get(..at)
    {
        hook(kept);
    }
    result
}

/// The loop itself: resume, then model calls and tool rounds until the
/// model answers or a call pauses.
async fn run_loop(
    lp: &mut Loop,
    history: &mut Vec<Message>,
    resume: Option<&Resume>,
    max_turns: u32,
    caller: Caller,
) -> Result<Generation> {
    match resume {
        // The history as given is where a failed loop without a resume
        // goes back to: nothing of this loop ran yet.
        None => lp.seam(history),
        // A turn's resume that answers anything was checked before its
        // claim (`agent/decide.rs`); an empty one claims nothing and is
        // checked here, as `generate` checks every resume.
        Some(resume) if caller == Caller::Generate || resume.is_empty() => resume::validate(history, resume)?,
        Some(_) => {}
    }
    if let Some(resume) = resume {
        match resume::apply(history, resume, &lp.dispatcher, lp.index).await? {
            resume::Applied::Interrupted => return Ok(lp.interrupted(std::mem::take(history))),
            resume::Applied::Continue(tool_message) => {
                if lp.dispatcher.sink.is_listening() {
                    lp.emit_tool_chunk(tool_message.content.clone());
                }
                history.push(tool_message);
                lp.index += 1;
                lp.seam(history);
            }
        }
    }

    let mut rounds: u32 = 0;
    loop {
        let step = if lp.dispatcher.chain.is_empty() {
            iteration(lp, history, &mut rounds, max_turns).await?
        } else {
            let chain = lp.dispatcher.chain.clone();
            let info = IterationInfo {
                round: rounds,
                context: Arc::clone(&lp.dispatcher.context),
            };
            let mut step = None;
            let slot = &mut step;
            let (lp, history, rounds) = (&mut *lp, &mut *history, &mut rounds);
            let run: IterationFn<'_> = Box::new(move || {
                Box::pin(async move {
                    let done = iteration(lp, history, rounds, max_turns).await?;
                    let report = done.report(history);
                    *slot = Some(done);
                    Ok(report)
                })
            });
            chain.call_iteration(info, run).await?;
            step.ok_or_else(|| {
                Error::FailedPrecondition(
                    "a middleware's iteration hook returned without running the iteration (call next.run())".into(),
                )
            })?
        };
        if let Step::Done(generation) = step {
            return Ok(*generation);
        }
    }
}
