//! Background results pushed into the parent's conversation
//! (docs/reference.md §16.7): when a parent's turn starts from a new
//! message, each background task of the session that settled since and
//! whose result the conversation has not seen yet is told first, as a
//! `user` message (a *notice*) right before the new one.
//!
//! Invariants:
//! - A task is told at most once per conversation: its notice is a message
//!   of the turn's history, saved with the turn's snapshot, and a later
//!   scan finds it and skips the task; a task whose final status a
//!   `check`, `wait` or `abort` output already reported is never told.
//! - Only tasks named by this session's own `NAME_start` outputs are
//!   read, through the very read (and access rule) of `check`: a task id
//!   of another session, or one the caller's principal may not see, reads
//!   as unknown and is never told.
//! - Notices go right before the turn's new user message, so never between
//!   a model's tool request and its response.
//! - Cost: nothing for an agent without background sub-agents or for a
//!   turn that is not a new message; otherwise one scan of the history and
//!   one store read per outstanding task, none when no task is outstanding.

use std::collections::HashSet;

use futures::future::join_all;
use serde_json::{Map, Value};

use super::background::{REPORTING, START, check_report, is_settled};
use crate::agent::turn::Turn;
use crate::agent::{Agent, principal_of};
use crate::message::metadata::PENDING_OUTPUT;
use crate::message::{Message, Role};

/// The metadata key of a notice, on its `user` message: `{"taskId",
/// "agent", "status", "answer"?, "error"?}`, as `check` reports it.
pub const BACKGROUND_TASK: &str = "backgroundTask";

/// The background sub-agents of an agent, whose settled tasks its turns
/// tell the model about.
#[derive(Clone, Default)]
pub(crate) struct Notices {
    children: Vec<Agent>,
}

/// What a tool response of a background tool says about a task.
enum Said {
    /// A `start` output: the task exists.
    Started,
    /// A `check`, `wait` or `abort` output (or a `start` one) with a final
    /// status: the model has the result.
    Settled,
}

impl Notices {
    /// Notices for the tasks of these background children.
    pub(crate) fn new(children: Vec<Agent>) -> Self {
        Notices { children }
    }

    /// Puts a notice before the new user message of `turn` in `messages`
    /// (the turn's history) for each outstanding task that settled. Does
    /// nothing for a turn without a new message. A task whose read fails is
    /// left for a later turn (it stays outstanding).
    pub(crate) async fn deliver(&self, turn: &Turn, messages: &mut Vec<Message>) {
        if self.children.is_empty() || turn.input().message.is_none() {
            return;
        }
        if messages.last().is_none_or(|m| m.role != Role::User) {
            return;
        }
        let outstanding = self.outstanding(messages);
        if outstanding.is_empty() {
            return;
        }
        let session = turn.session_id();
        let context = turn.request_context();
        let principal = principal_of(&context);
        let caller = session.as_str();
        let reads = outstanding.iter().map(|(child, task)| async move {
            match check_report(child, caller, principal, task).await {
                Ok(report) => report.and_then(|r| notice(child.name(), r)),
                Err(error) => {
                    tracing::warn!(task = %task, error = %error, "a background task's outcome could not be read");
                    None
                }
            }
        });
        let notices: Vec<Message> = join_all(reads).await.into_iter().flatten().collect();
        let at = messages.len() - 1;
        messages.splice(at..at, notices);
    }

    /// The tasks this history started whose result it does not hold yet (no
    /// final report, no notice), in the order they were started.
    fn outstanding(&self, messages: &[Message]) -> Vec<(&Agent, String)> {
        let mut started: Vec<(&Agent, String)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for message in messages {
            if message.role == Role::User {
                if let Some(task) = told(message) {
                    seen.insert(task.to_owned());
                }
                continue;
            }
            for part in &message.content {
                // A response, or a request that finished while a sibling
                // paused (its output waits in `pendingOutput`).
                let (name, output) = match (part.as_tool_response(), part.as_tool_request()) {
                    (Some(r), _) => (&r.name, r.output.as_ref()),
                    (None, Some(r)) => (&r.name, part.meta(PENDING_OUTPUT)),
                    (None, None) => continue,
                };
                let Some((child, said, task)) = self.said(name, output) else {
                    continue;
                };
                match said {
                    Said::Settled => {
                        seen.insert(task.to_owned());
                    }
                    Said::Started if !started.iter().any(|(_, t)| t == task) => {
                        started.push((child, task.to_owned()));
                    }
                    Said::Started => {}
                }
            }
        }
        started.retain(|(_, task)| !seen.contains(task));
        started
    }

    /// What the output of tool `name` says, when it is a background tool of
    /// one of these children and names a task.
    fn said<'a>(&self, name: &str, output: Option<&'a Value>) -> Option<(&Agent, Said, &'a str)> {
        let output = output?;
        let task = output.get("taskId")?.as_str()?;
        let (child, suffix) = self.children.iter().find_map(|child| {
            let suffix = name.strip_prefix(child.name())?.strip_prefix('_')?;
            (suffix == START || REPORTING.contains(&suffix)).then_some((child, suffix))
        })?;
        let settled = output.get("status").and_then(Value::as_str).is_some_and(is_settled);
        if settled {
            return Some((child, Said::Settled, task));
        }
        (suffix == START).then_some((child, Said::Started, task))
    }
}

/// The task a notice message tells of.
fn told(message: &Message) -> Option<&str> {
    message.metadata.as_ref()?.get(BACKGROUND_TASK)?.get("taskId")?.as_str()
}

/// The notice of a task of `agent` whose check report is `report`, when
/// the task settled.
fn notice(agent: &str, report: Value) -> Option<Message> {
    let status = report.get("status")?.as_str()?;
    if !is_settled(status) {
        return None;
    }
    let task = report.get("taskId")?.as_str()?;
    let text = |key: &str| report.get(key).and_then(Value::as_str);
    let what = match status {
        "done" => format!("finished: {}", text("answer").unwrap_or_default()),
        "failed" => "failed".to_owned(),
        "aborted" => "was aborted".to_owned(),
        "expired" => "stopped: its worker died (in doubt)".to_owned(),
        _ => "ended: its paused calls were closed".to_owned(),
    };
    let mut line = format!("Background task {task} ({agent}) {what}");
    if let Some(error) = text("error") {
        line.push_str(&format!(": {error}"));
    }
    let mut data = Map::new();
    data.insert("taskId".to_owned(), Value::String(task.to_owned()));
    data.insert("agent".to_owned(), Value::String(agent.to_owned()));
    data.insert("status".to_owned(), Value::String(status.to_owned()));
    for key in ["answer", "error"] {
        if let Some(value) = report.get(key) {
            data.insert(key.to_owned(), value.clone());
        }
    }
    let mut message = Message::user_text(line);
    let mut meta = Map::new();
    meta.insert(BACKGROUND_TASK.to_owned(), Value::Object(data));
    message.metadata = Some(meta);
    Some(message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::Part;

    fn response(name: &str, output: Value) -> Message {
        Message::new(Role::Tool, vec![Part::tool_response(name, None, Some(output))])
    }

    fn running(task: &str) -> Value {
        json!({"taskId": task, "status": "running"})
    }

    #[test]
    fn outstanding_tasks_are_started_and_neither_reported_settled_nor_told() {
        let agent = |name: &str| Agent::custom(name, |_t: Turn| async { Ok(()) }).build().unwrap();
        let notices = Notices::new(vec![agent("researcher"), agent("researcher_x")]);
        let mut paused_sibling = Part::tool_request("researcher_start", Some("p".into()), None);
        paused_sibling.set_meta(PENDING_OUTPUT, running("t5"));
        let history = vec![
            Message::user_text("go"),
            response("researcher_start", running("t1")),
            response("researcher_start", running("t2")),
            response("researcher_check", running("t2")),
            response("researcher_start", running("t3")),
            response(
                "researcher_wait",
                json!({"taskId": "t3", "status": "done", "answer": "a"}),
            ),
            response("researcher_start", running("t4")),
            notice("researcher", json!({"taskId": "t4", "status": "failed"})).unwrap(),
            Message::new(Role::Model, vec![paused_sibling]),
            response("researcher_start", running("t1")),
            response("researcher_x_start", running("t6")),
            response("researcher_x_abort", json!({"taskId": "t7", "status": "aborted"})),
            response("dig", running("t8")),
            Message::user_text("hello"),
        ];
        let got: Vec<(&str, String)> = notices
            .outstanding(&history)
            .into_iter()
            .map(|(child, task)| (child.name(), task))
            .collect();
        let want = [
            ("researcher", "t1"),
            ("researcher", "t2"),
            ("researcher", "t5"),
            ("researcher_x", "t6"),
        ];
        assert_eq!(got, want.map(|(a, t)| (a, t.to_owned())));
    }

    #[test]
    fn a_done_notice_carries_the_answer_in_text_and_metadata() {
        let report = json!({"taskId": "bg-1", "status": "done", "answer": "42"});
        let m = notice("researcher", report).unwrap();
        assert_eq!(m.role, Role::User);
        assert_eq!(m.text(), "Background task bg-1 (researcher) finished: 42");
        assert_eq!(
            m.metadata.unwrap()[BACKGROUND_TASK],
            json!({"taskId": "bg-1", "agent": "researcher", "status": "done", "answer": "42"})
        );
    }

    #[test]
    fn a_failed_notice_says_the_error_and_an_unsettled_report_none() {
        let report = json!({"taskId": "bg-1", "status": "failed", "error": "boom"});
        let m = notice("r", report).unwrap();
        assert_eq!(m.text(), "Background task bg-1 (r) failed: boom");
        assert_eq!(m.metadata.unwrap()[BACKGROUND_TASK]["error"], "boom");
        for status in ["running", "paused"] {
            assert!(notice("r", json!({"taskId": "bg-1", "status": status})).is_none());
        }
    }
}
