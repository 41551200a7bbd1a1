//! Sub-agents (docs/reference.md §16): an agent as a tool of another.
//!
//! The parent's model calls the child like any tool; the child runs its
//! own turn in its own session (in the parent's store) and its final
//! answer is the call's output. When the child pauses, the parent's call
//! pauses with the child's holds inside its interrupt data (a
//! [`SurfacedHold`]); answering them at the root resumes the child from
//! its paused snapshot, then the parent goes on with the child's answer.
//!
//! Invariants:
//! - The child's snapshot a resume continues is read from the parent's
//!   paused snapshot (trusted), never from the client's answer.
//! - Nested answers are checked against the child's paused snapshot
//!   before the parent's claim: a bad one is refused with nothing claimed
//!   or written at any level (`nest.rs`).
//! - Each level claims its own paused snapshot exactly once; a child runs
//!   inside its parent's call (no task of its own), so a parent that dies
//!   mid-resume leaves both levels in doubt, never re-run.

mod abandon;
mod background;
mod check;
mod nest;
mod notice;
mod pending;
mod tool;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::decide::{Decider, Level};
use super::nesting::Nesting;
use super::{Agent, AgentBuilder};
use crate::model::ToolDefinition;
use crate::session::SessionStore;
use crate::tool::Tool;

pub(crate) use abandon::abandon_children;

pub use crate::message::surfaced::{SurfacedHold, answerable};
pub use background::BACKGROUND_MAX_WAIT;
pub(crate) use nest::{nest, nested_error};
pub use notice::BACKGROUND_TASK;
pub(crate) use notice::Notices;
pub(crate) use pending::expand;
pub(crate) use tool::nested_resume;
pub use tool::{ChildFailure, SubagentOptions, SubagentTool};

/// The key of a surfaced hold in a paused call's interrupt data, of the
/// nested answers in a restart's resume data, and of the sub-agent marker
/// in a tool definition's metadata.
pub use crate::message::metadata::SUBAGENT;

/// The metadata key, on the first user message of a child's session, of
/// its link to the parent: `{"agent", "sessionId", "tool", "ref"}`.
pub use crate::message::metadata::SUBAGENT_OF;

/// The request-context key under which a parent's turn tells its
/// sub-agent tools its session (`{"sessionId": …}`); never passed on to
/// the child.
pub const CALLER: &str = "holdpoint.caller";

/// The separator of a nested call's compound ref in listings: the refs of
/// the sub-agent calls it is nested in, outermost first, then its own
/// (a call without a ref is named by its tool).
pub use crate::message::metadata::REF_SEPARATOR;

/// One level of the way from a root session to a nested hold: the call
/// of the parent that surfaced it and the child session it paused in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStep {
    /// The parent's tool (the child agent's name).
    pub tool: String,
    /// The parent's call ref.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The child agent.
    pub agent: String,
    /// The child's session.
    pub session_id: String,
    /// The child's paused snapshot.
    pub snapshot_id: String,
}

/// The request-context key by which a sub-agent tool tells its child's
/// turn that it runs as that child (its value is this process's
/// [`parent_token`], so no caller can forge it).
pub(crate) const PARENT_CALL: &str = "holdpoint.parentCall";

/// A random token of this process, the value of [`PARENT_CALL`].
pub(crate) fn parent_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| uuid::Uuid::new_v4().to_string())
}

/// The link of a session started as a (foreground) sub-agent call: its
/// first message's `subagentOf`, unless that says `background`.
pub(crate) fn parent_link(messages: &[crate::message::Message]) -> Option<&Value> {
    let link = messages.first()?.metadata.as_ref()?.get(SUBAGENT_OF)?;
    (link.get("background") != Some(&Value::Bool(true))).then_some(link)
}

/// Whether `context` is a foreground sub-agent call's, set by its parent's
/// call in this process (no caller can forge the token).
pub(crate) fn from_parent_call(context: &Map<String, Value>) -> bool {
    context.get(PARENT_CALL).and_then(Value::as_str) == Some(parent_token())
}

/// Refuses a resume of a foreground child's paused calls that does not
/// come from its parent's call: its holds are answered at the root (§16.3),
/// where an answer here would leave the parent waiting on a stale hold.
/// Settlements of calls in doubt (§16.4) are the operator's and allowed.
pub(crate) fn check_direct(
    messages: &[crate::message::Message],
    settles: bool,
    context: &Map<String, Value>,
) -> crate::error::Result<()> {
    let Some(link) = parent_link(messages) else {
        return Ok(());
    };
    if settles || from_parent_call(context) {
        return Ok(());
    }
    Err(crate::error::Error::FailedPrecondition(format!(
        "this session runs as a sub-agent call of agent {} (session {}): answer its paused calls there, where they are listed",
        link.get("agent").unwrap_or(&Value::Null),
        link.get("sessionId").unwrap_or(&Value::Null)
    )))
}

/// Whether `definition` is a sub-agent tool's.
pub(crate) fn is_subagent(definition: &ToolDefinition) -> bool {
    definition.metadata.as_ref().is_some_and(|m| m.contains_key(SUBAGENT))
}

/// Whether `def` has foreground sub-agent tools, whose children hand
/// their rows to its turns (`agent::handoff`).
pub(crate) fn collects(def: &super::AgentDef) -> bool {
    def.tools.iter().any(|d| {
        d.metadata
            .as_ref()
            .and_then(|m| m.get(SUBAGENT))
            .is_some_and(|s| s.get("background").is_none())
    })
}

/// The request context a turn of an agent with sub-agent tools hands its
/// tools: `context` with [`CALLER`] naming the session (others get
/// `context` itself, uncopied).
pub(crate) fn with_caller(
    context: Arc<Map<String, Value>>,
    session_id: impl FnOnce() -> String,
    tools: &[Arc<dyn Tool>],
) -> Arc<Map<String, Value>> {
    if !tools.iter().any(|t| is_subagent(t.definition())) {
        return context;
    }
    let mut map = (*context).clone();
    let mut caller = Map::new();
    caller.insert("sessionId".to_owned(), Value::String(session_id()));
    map.insert(CALLER.to_owned(), Value::Object(caller));
    Arc::new(map)
}

impl AgentBuilder {
    /// Adds `agent` as a tool (named after it): the model calls it with
    /// `{"input": "…"}`, the child runs a turn in its own session and its
    /// final text is the call's output; its holds surface on this agent's
    /// turn (docs/reference.md §16). The child must keep its sessions in
    /// this agent's store.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use holdpoint::agent::{Agent, AgentInit, AgentInput};
    /// use holdpoint::middleware::ToolApproval;
    /// use holdpoint::session::{InMemoryStore, SessionStore, SnapshotQuery};
    /// use holdpoint::tool::{DynamicTool, ToolContext};
    /// use holdpoint::{FinishReason, Resume, Role, ScriptedModel, ScriptedTurn};
    /// use serde_json::{Value, json};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store: Arc<dyn SessionStore> = Arc::new(InMemoryStore::new());
    /// // The child: its transfer is held by ToolApproval.
    /// let transfer = DynamicTool::new(
    ///     "transferMoney",
    ///     "moves money",
    ///     json!({"type": "object"}),
    ///     |_ctx: ToolContext, input: Value| async move { Ok(json!({"transactionId": "txn-1", "amount": input["amount"]})) },
    /// )
    /// .into_tool();
    /// let banking_model = ScriptedModel::from_fn("scripted/banking", |request, _| {
    ///     let last = request.messages.last()?;
    ///     Some(if last.role == Role::Tool {
    ///         ScriptedTurn::text("moved $500")
    ///     } else {
    ///         ScriptedTurn::tool_call("transferMoney", json!({"amount": 500, "toAccount": "savings"}))
    ///     })
    /// });
    /// let banking = Agent::builder("bankingAgent")
    ///     .model(Arc::new(banking_model))
    ///     .tools(vec![transfer])
    ///     .middleware(ToolApproval::allow(Vec::<String>::new()).into_middleware())
    ///     .store(Arc::clone(&store))
    ///     .build()?;
    /// // The root hands the request to the child and relays its answer.
    /// let support_model = ScriptedModel::from_fn("scripted/support", |request, _| {
    ///     let last = request.messages.last()?;
    ///     Some(if last.role == Role::Tool {
    ///         let out = last.content.first()?.as_tool_response()?.output.clone()?;
    ///         ScriptedTurn::text(out.as_str()?.to_owned())
    ///     } else {
    ///         ScriptedTurn::tool_call("bankingAgent", json!({"input": last.text()}))
    ///     })
    /// });
    /// let support = Agent::builder("supportAgent")
    ///     .model(Arc::new(support_model))
    ///     .subagent(banking)
    ///     .store(store)
    ///     .build()?;
    ///
    /// let held = support.run_text("Transfer $500 to savings").await?;
    /// assert_eq!(held.finish_reason, FinishReason::Interrupted);
    /// // The root lists the real question, under a compound ref.
    /// let entry = support.decisions().pending(SnapshotQuery::default()).await?.remove(0);
    /// assert_eq!(entry.tool, "transferMoney");
    /// assert_eq!(entry.path[0].agent, "bankingAgent");
    /// // The output answers it directly too: `holds()` shows the same
    /// // call under the same compound ref, and a typed claim sees through
    /// // the sub-agent call that surfaced it.
    /// let held_call = &held.holds()[0];
    /// assert_eq!(held_call.as_tool_request().map(|r| &r.reference), entry.part.as_tool_request().map(|r| &r.reference));
    /// assert!(ToolApproval::interrupted(&held.interrupts()[0]).is_some());
    /// // Answered at the root: the child resumes in place, then the root.
    /// let approve = ToolApproval::interrupted(&entry.part).expect("an approval hold").approve(Some("ok"))?;
    /// let init = AgentInit::snapshot(held.snapshot_id.clone().expect("a paused snapshot"));
    /// let done = support.run(AgentInput::resume(Resume::from_parts([approve])), init).await?;
    /// assert_eq!(done.text(), "moved $500");
    /// # Ok::<(), holdpoint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn subagent(self, agent: Agent) -> Self {
        self.subagent_with(agent, SubagentOptions::default())
    }

    /// Adds `agent` as a background sub-agent: four tools,
    /// `NAME_start` (`{"input"}` → `{"taskId"}`: the child runs detached
    /// in its own session), `NAME_check`, `NAME_wait` (`{"taskId",
    /// "timeoutMs"}`, bounded by `max_wait` and [`BACKGROUND_MAX_WAIT`]) and
    /// `NAME_abort` (docs/reference.md §16.7). A background child's holds
    /// are its own: listed and answered on `agent`.
    ///
    /// A task's result also reaches this agent's session unasked: when a
    /// turn of it starts from a new message, each task the session started
    /// that settled since (done, failed, aborted, expired or closed) and
    /// whose final status no `check`, `wait` or `abort` output reported yet
    /// is told once, in a `user` message right before the new one, whose
    /// metadata carries [`BACKGROUND_TASK`] `{"taskId", "agent", "status",
    /// "answer"?, "error"?}`. The notice is saved with the turn, so it is
    /// told once, also by an agent rebuilt on the same store after a
    /// restart.
    pub fn background_subagent(mut self, agent: Agent, max_wait: std::time::Duration) -> Self {
        let tools = background::tools(&self.name, &agent, max_wait);
        self.tools.extend(tools);
        self.background.push(agent);
        self
    }

    /// [`subagent`](Self::subagent) with options (what a child's failure
    /// does to this agent's turn).
    pub fn subagent_with(mut self, agent: Agent, options: SubagentOptions) -> Self {
        self.children.push(agent.clone());
        let tool = SubagentTool::new(&self.name, agent, options);
        self.tools.push(Arc::new(tool));
        self
    }
}

/// Sub-agents as the turn pipeline's [`Nesting`] hooks: the one place the
/// pipeline reaches them.
pub(crate) struct SubAgents;

#[async_trait::async_trait]
impl Nesting for SubAgents {
    fn route(
        &self,
        history: &[crate::message::Message],
        resume: &mut crate::generate::Resume,
    ) -> crate::error::Result<()> {
        nest(history, resume)
    }

    fn resumed_by_parent(&self, context: &Map<String, Value>) -> bool {
        from_parent_call(context)
    }

    fn check_direct(
        &self,
        messages: &[crate::message::Message],
        settles: bool,
        context: &Map<String, Value>,
    ) -> crate::error::Result<()> {
        check_direct(messages, settles, context)
    }

    async fn check_below(
        &self,
        store: &dyn SessionStore,
        level: &Level<'_>,
        resume: &crate::generate::Resume,
        decider: &Decider<'_>,
        caller: &str,
        read: &mut Vec<crate::session::Snapshot>,
    ) -> crate::error::Result<()> {
        check::check_children(store, level, resume, decider, caller, 0, read).await
    }

    async fn abandon_below(
        &self,
        store: &dyn SessionStore,
        history: &[crate::message::Message],
        context: &Map<String, Value>,
        lease: std::time::Duration,
    ) {
        abandon_children(store, history, context, lease).await;
    }

    fn collects(&self, def: &super::AgentDef) -> bool {
        collects(def)
    }
}
