//! A live call held on the server's question: waiting for its result,
//! holding it under a fresh id, and sending the resume's answer on the
//! still-open request.

use std::time::Instant;

use holdpoint::tool::ToolOutcome;
use holdpoint::{Error, Result};
use serde_json::{Map, Value, json};

use super::McpTool;
use super::convert::convert;
use crate::answer::{self, Answer, Answers, ELICITATION, MCP_KEY};
use crate::client::{Held, LiveCall, Question, Reply};

impl McpTool {
    /// Waits for the open call's result, or holds it on the server's
    /// question. The call timeout counts from now.
    pub(super) async fn drive(&self, mut call: LiveCall) -> ToolOutcome {
        enum Next {
            Done(std::result::Result<std::result::Result<Reply, String>, ()>),
            Asked(Question),
            TimedOut,
        }
        let limit = self.shared.config.call_timeout();
        let next = tokio::select! {
            r = &mut call.done => Next::Done(r.map_err(|_| ())),
            Some(q) = call.questions.recv() => Next::Asked(q),
            _ = tokio::time::sleep(limit) => Next::TimedOut,
        };
        match next {
            Next::Done(Ok(Ok(Reply::Complete(result)))) => {
                self.shared.call_succeeded();
                convert(&self.definition.name, &result)
            }
            Next::Done(Ok(Ok(Reply::InputRequired(result)))) => {
                self.shared.call_succeeded();
                self.input_required(&result)
            }
            Next::Done(Ok(Err(message))) => self.fail(message),
            Next::Done(Err(())) => self.fail("the call ended without an answer"),
            Next::TimedOut => {
                drop(call);
                self.fail(format!("no answer within {limit:?}; the call was cancelled"))
            }
            Next::Asked(q) => self.hold(call, q),
        }
    }

    /// Holds `call` on the question `q`: registers it and returns the
    /// interrupt.
    fn hold(&self, call: LiveCall, q: Question) -> ToolOutcome {
        let p = &q.params;
        let mode = p.get("mode").and_then(Value::as_str).unwrap_or("form").to_owned();
        let message = p.get("message").cloned().unwrap_or(Value::String(String::new()));
        let id = uuid::Uuid::new_v4().to_string();
        let mut mcp = Map::new();
        mcp.insert("type".into(), Value::String(ELICITATION.into()));
        mcp.insert("server".into(), Value::String(self.server().to_owned()));
        mcp.insert("tool".into(), Value::String(self.mcp_name.clone()));
        mcp.insert("mode".into(), Value::String(mode.clone()));
        mcp.insert("liveCall".into(), Value::String(id.clone()));
        if mode == "url" {
            for key in ["url", "elicitationId"] {
                if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
                    mcp.insert(key.into(), v.clone());
                }
            }
        } else {
            mcp.insert(
                "requestedSchema".into(),
                p.get("requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
        }
        let mut data = Map::new();
        data.insert("message".into(), message);
        data.insert(MCP_KEY.into(), Value::Object(mcp));
        self.shared.sweep_held();
        self.shared.held().insert(
            id,
            Held {
                call,
                reply: q.reply,
                data: data.clone(),
                since: Instant::now(),
            },
        );
        ToolOutcome::Interrupt(data)
    }

    /// Answers a held call's question and goes on waiting for its result.
    pub(super) async fn answer_live(
        &self,
        part: &Map<String, Value>,
        resumed: &Map<String, Value>,
    ) -> Result<ToolOutcome> {
        let Some(id) = part.get("liveCall").and_then(Value::as_str) else {
            return Ok(self.fail("the hold names no live call"));
        };
        let answer = match Answers::parse(resumed).map_err(Error::InvalidArgument)? {
            Answers::One(a) => a,
            Answers::ByKey(_) => {
                return Err(Error::InvalidArgument(
                    "a server's question during a call takes one answer (`action`), not `responses`".into(),
                ));
            }
        };
        let Some(mut held) = self.shared.held().remove(id) else {
            return Ok(self.fail(format!(
                "the call held on MCP server \"{}\"'s question is no longer open (the process restarted, \
                 the server went away, or the question expired); its outcome is unknown and it was not run again",
                self.server()
            )));
        };
        if held.call.tool != self.mcp_name {
            return Ok(self.fail("the hold belongs to another tool"));
        }
        let mcp = held
            .data
            .get(MCP_KEY)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let problem = if mcp.get("mode").and_then(Value::as_str) == Some("url") {
            matches!(&answer, Answer::Accept(Some(_)))
                .then(|| "a URL-mode question is answered on the server's page; accept carries no content".to_owned())
        } else {
            let schema = mcp
                .get("requestedSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            answer::check_content(&schema, &answer).err()
        };
        if let Some(problem) = problem {
            // The question stays open and is asked again with the reason.
            held.data.insert("error".into(), Value::String(problem));
            let data = held.data.clone();
            self.shared.held().insert(id.to_owned(), held);
            return Ok(ToolOutcome::Interrupt(data));
        }
        if held.reply.send(answer.to_result()).is_err() {
            return Ok(self.fail(format!(
                "MCP server \"{}\"'s question expired before the answer (the server was told cancel); the answer was not sent",
                self.server()
            )));
        }
        let Held { call, .. } = held;
        Ok(self.drive(call).await)
    }
}
