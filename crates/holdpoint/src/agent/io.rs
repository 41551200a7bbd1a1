//! The agent's wire types: `AgentInit`, `AgentInput`, `AgentStreamChunk`,
//! `TurnEnd` and `AgentOutput`, in Genkit's JSON shapes (docs/reference.md §5).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, ErrorBody, Result};
use crate::generate::Resume;
use crate::message::{Message, Part, Role};
use crate::model::{FinishReason, GenerateChunk};
use crate::session::Artifact;

/// Where a run starts: a new conversation (empty), a stored session or
/// snapshot (server-managed agents), or client-held state.
///
/// Unlike a message's, its unknown fields are refused: a mistyped
/// `sessionId` would otherwise start a new conversation without a word.
///
/// ```
/// use holdpoint::agent::AgentInit;
/// let init: AgentInit = serde_json::from_str(r#"{"sessionId":"s1"}"#)?;
/// assert_eq!(init, AgentInit::session("s1"));
/// assert!(serde_json::from_str::<AgentInit>(r#"{"sesionId":"typo"}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentInit {
    /// Continue (or start, with this id) a stored session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Continue from exactly this stored snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// Client-held state from an earlier `AgentOutput.state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

impl AgentInit {
    /// A new conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored session with this id (its latest snapshot), or a new
    /// session bound to it.
    pub fn session(id: impl Into<String>) -> Self {
        AgentInit {
            session_id: Some(id.into()),
            ..Self::default()
        }
    }

    /// Exactly this stored snapshot.
    pub fn snapshot(id: impl Into<String>) -> Self {
        AgentInit {
            snapshot_id: Some(id.into()),
            ..Self::default()
        }
    }

    /// Client-held state.
    pub fn state(state: Value) -> Self {
        AgentInit {
            state: Some(state),
            ..Self::default()
        }
    }
}

/// One input to an agent: a user message, answers to paused calls, and/or
/// a request to detach.
///
/// Its own unknown fields are refused, as [`AgentInit`]'s are: a mistyped
/// `message` would leave `{}`, which runs a turn. Those of the message,
/// its parts and the resume inside it are ignored ([`Message`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentInput {
    /// A user message (role `user`, no tool parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// Restart and respond directives for the paused calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// Return at once and go on in the background (server-managed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach: Option<bool>,
}

impl AgentInput {
    /// A user text message.
    pub fn text(text: impl Into<String>) -> Self {
        Self::message(Message::user_text(text))
    }

    /// A user message.
    pub fn message(message: Message) -> Self {
        AgentInput {
            message: Some(message),
            ..Self::default()
        }
    }

    /// Answers to paused calls.
    pub fn resume(resume: Resume) -> Self {
        AgentInput {
            resume: Some(resume),
            ..Self::default()
        }
    }

    /// A bare detach request.
    pub fn detach() -> Self {
        AgentInput {
            detach: Some(true),
            ..Self::default()
        }
    }

    /// Whether this input asks to detach.
    pub fn is_detach(&self) -> bool {
        self.detach == Some(true)
    }

    /// Whether it carries a message or directives (something to run).
    pub fn has_payload(&self) -> bool {
        self.message.is_some() || self.resume.as_ref().is_some_and(|r| !r.is_empty())
    }

    /// An empty input (`{}`): no message, no resume, no detach. It runs a
    /// turn on the conversation as it stands, with no new user message:
    /// after a failed turn, a re-attempt from its last seam (tools that
    /// completed do not run again); otherwise a fresh model call
    /// (docs/reference.md §5.3).
    pub fn continues(&self) -> bool {
        self.message.is_none() && self.resume.is_none() && !self.is_detach()
    }

    /// Whether a turn runs for it: a payload, or an empty input.
    pub fn runs_turn(&self) -> bool {
        self.has_payload() || self.continues()
    }

    /// Checks the input rules: a user message without tool parts, and a
    /// message, a resume or a detach.
    pub fn validate(&self) -> Result<()> {
        if let Some(m) = &self.message {
            if m.role != Role::User {
                return Err(Error::InvalidArgument(format!(
                    "input message must have role user, got {}",
                    serde_json::to_string(&m.role).unwrap_or_default()
                )));
            }
            if m.content
                .iter()
                .any(|p: &Part| p.as_tool_request().is_some() || p.as_tool_response().is_some())
            {
                return Err(Error::InvalidArgument(
                    "input message must not contain tool parts; answer paused calls with resume".into(),
                ));
            }
        }
        if self.message.is_some() && self.resume.as_ref().is_some_and(|r| !r.is_empty()) {
            return Err(Error::InvalidArgument(
                "an input carries a message or a resume, not both: answer the paused calls first".into(),
            ));
        }
        if !self.has_payload() && !self.is_detach() && !self.continues() {
            return Err(Error::InvalidArgument(
                "a resume needs at least one directive (send {} to continue the conversation as it stands)".into(),
            ));
        }
        Ok(())
    }
}

/// The end of one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnEnd {
    /// How the turn ended.
    pub finish_reason: FinishReason,
    /// The snapshot written for it (server-managed agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

/// The start of one turn, streamed before anything else of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStart {
    /// The turn's index on its connection, from 0.
    pub turn_index: u32,
}

/// One streamed event of an agent run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStreamChunk {
    /// A turn starts; every turn's chunks, `turnEnd` last, follow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_start: Option<TurnStart>,
    /// A model chunk (role `model`) or tool results (role `tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_chunk: Option<GenerateChunk>,
    /// An artifact added or replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// RFC 6902 operations on the custom state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_patch: Option<Value>,
    /// The turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_end: Option<TurnEnd>,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentOutput {
    /// The session's id.
    pub session_id: String,
    /// The latest snapshot (server-managed agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// How the last turn ended.
    pub finish_reason: FinishReason,
    /// The last model message (the paused one when interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The session's artifacts.
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    /// Client-held state (client-managed agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// Why the turn failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// Why the turn failed, typed (set with `error`). Not on the wire:
    /// an output read back from JSON has `None`.
    #[serde(skip)]
    pub failure: Option<FailureReason>,
    /// How long the paused calls this turn answered had been held: from
    /// the paused snapshot's write to the end of the resume (`None` for a
    /// turn that answered nothing, and for client-held state, whose write
    /// time is unknown). Not on the wire.
    #[serde(skip)]
    pub held_for: Option<Duration>,
}

/// Why a turn failed: the kind of its error, decided where the error
/// arises (no message matching).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// The resume lost the exactly-once claim: another resume (or a replay
    /// of the same client-held state) answered the paused calls first.
    AlreadyResumed,
    /// A new message abandoned the paused calls the resume answers.
    Abandoned,
    /// Another operation won a race on the session (for example, the
    /// session went on from a later snapshot, leaving this one behind).
    Conflict,
    /// The resume does not fit the paused calls (unknown or unanswered
    /// call, modified input, an answer the tool refuses).
    InvalidResume,
    /// The caller may not give this answer (an approval rule, roles,
    /// self-approval, the session's owner): refused before anything was
    /// claimed or written, the hold still waits (docs/reference.md §10.10).
    Refused,
    /// A tool failed with a plain error, or the model named a tool the
    /// agent lacks.
    ToolFailed,
    /// The model asked for tools more rounds than the agent allows.
    TurnLimit,
    /// The turn was cancelled or aborted.
    Cancelled,
    /// Anything else: the model provider, the store, a custom handler's
    /// error, a broken invariant.
    Other,
}

impl FailureReason {
    /// The reason of a turn that failed with `error`.
    pub fn of(error: &Error) -> FailureReason {
        match error {
            Error::AlreadyResumed(_) | Error::AlreadyAnswered(_) => FailureReason::AlreadyResumed,
            Error::Abandoned(_) => FailureReason::Abandoned,
            Error::Aborted(_) => FailureReason::Conflict,
            Error::InvalidArgument(_) | Error::UnresolvedToolRequest { .. } => FailureReason::InvalidResume,
            Error::PermissionDenied(_) => FailureReason::Refused,
            Error::ToolFailed { .. } | Error::ToolNotFound(_) => FailureReason::ToolFailed,
            Error::MaxTurnsExceeded(_) => FailureReason::TurnLimit,
            Error::Cancelled(_) => FailureReason::Cancelled,
            Error::TurnFailed(out) => out.failure.unwrap_or(FailureReason::Other),
            _ => FailureReason::Other,
        }
    }

    /// Whether the resume was refused on the decision path before anything
    /// was claimed (it does not fit or validate, or the caller may not give
    /// it): nothing of it ran or was written, the calls still wait, and an
    /// HTTP server answers 4xx rather than a failed output.
    pub fn is_refusal(self) -> bool {
        matches!(self, FailureReason::InvalidResume | FailureReason::Refused)
    }

    /// Whether the turn lost a race for the paused calls (already
    /// resumed, abandoned, left behind): nothing of it ran, and an HTTP
    /// server answers 409 rather than a failed output.
    pub fn is_conflict(self) -> bool {
        matches!(
            self,
            FailureReason::AlreadyResumed | FailureReason::Abandoned | FailureReason::Conflict
        )
    }
}

impl AgentOutput {
    /// The text of the output message.
    pub fn text(&self) -> String {
        self.message.as_ref().map(Message::text).unwrap_or_default()
    }

    /// The paused tool requests, to answer with a resume.
    pub fn interrupts(&self) -> Vec<Part> {
        self.message
            .as_ref()
            .map(|m| m.interrupts().cloned().collect())
            .unwrap_or_default()
    }

    /// [`interrupts`](Self::interrupts), moved out of the output's
    /// message instead of copied: the output is left without its message.
    pub fn take_interrupts(&mut self) -> Vec<Part> {
        match self.message.take() {
            Some(m) => m.content.into_iter().filter(Part::is_interrupt).collect(),
            None => Vec::new(),
        }
    }

    /// Whether the turn failed.
    pub fn is_failed(&self) -> bool {
        self.finish_reason == FinishReason::Failed
    }

    /// A failed output as [`Error::TurnFailed`] (carrying it), any other
    /// as itself.
    pub fn into_result(self) -> Result<AgentOutput> {
        if self.is_failed() {
            Err(Error::TurnFailed(crate::error::FailedTurn::new(self)))
        } else {
            Ok(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_rules() {
        assert!(AgentInput::text("hi").validate().is_ok());
        assert!(AgentInput::detach().validate().is_ok());
        assert!(AgentInput::default().validate().is_ok(), "{{}} continues");
        assert!(AgentInput::default().continues());
        assert!(!AgentInput::detach().continues());
        let empty_resume = AgentInput::resume(Resume::default());
        assert!(empty_resume.validate().is_err());
        let err = AgentInput::message(Message::model_text("x")).validate().unwrap_err();
        assert!(err.to_string().contains("role user"), "{err}");
        let with_tool = Message::new(Role::User, vec![Part::tool_request("t", None, None)]);
        assert!(AgentInput::message(with_tool).validate().is_err());
    }

    #[test]
    fn unknown_input_fields_rejected() {
        assert!(serde_json::from_str::<AgentInput>(r#"{"messages":[]}"#).is_err());
        assert!(serde_json::from_str::<AgentInit>(r#"{"state":{},"extra":1}"#).is_err());
    }
}
