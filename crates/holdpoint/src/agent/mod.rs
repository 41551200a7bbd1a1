//! Agents (docs/reference.md §5): a definition (model, prompt, tools, middleware, store)
//! run turn by turn over a [`Connection`], or one input at a time with
//! [`Agent::run`].
//!
//! ```
//! use std::sync::Arc;
//! use holdpoint::agent::{Agent, AgentInit, AgentInput};
//! use holdpoint::session::InMemoryStore;
//! use holdpoint::{FinishReason, ScriptedModel, ScriptedTurn};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let model = ScriptedModel::new("scripted");
//! model.push(ScriptedTurn::text("hello back"));
//! let agent = Agent::builder("greeter")
//!     .model(Arc::new(model))
//!     .system("Be brief.")
//!     .store(Arc::new(InMemoryStore::new()))
//!     .build()?;
//! let out = agent.run(AgentInput::text("hi"), AgentInit::new()).await?;
//! assert_eq!(out.finish_reason, FinishReason::Stop);
//! assert_eq!(out.text(), "hello back");
//! assert!(out.snapshot_id.is_some());
//! # Ok::<(), holdpoint::Error>(())
//! # }).unwrap();
//! ```

mod access;
mod answer;
mod audit;
mod builder;
mod caller;
mod connection;
mod decide;
mod decisions;
mod detach;
mod direct;
mod escalate;
mod expire;
mod failed;
mod grant_answer;
mod grants;
mod handoff;
mod hold;
mod io;
mod load;
mod nesting;
mod pending_page;
mod prompt;
mod reads;
mod settle;
mod state_claim;
pub mod subagent;
mod turn;
mod wait;
mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value};

pub use access::{ACTOR, Access, PRINCIPAL, RunOptions, principal_of};
pub use answer::{Answer, AnswerKind, Answered};
pub use audit::{PendingApproval, TOOL_APPROVED};
pub use builder::AgentBuilder;
pub use caller::{AsCaller, Caller};
pub use connection::Connection;
pub use decide::OPERATOR_ROLE;
pub use decisions::Decisions;
pub use direct::DirectCall;
pub use expire::{EXPIRED_REASON, EXPIRY_ACTOR, Expired};
pub use io::{AgentInit, AgentInput, AgentOutput, AgentStreamChunk, FailureReason, TurnEnd, TurnStart};
pub use turn::{Responder, Turn};

use crate::approval::Policy;
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::middleware::Middleware;
use crate::model::Model;
use crate::session::{
    AuditDecision, AuditQuery, AuditRecord, AuditStore, Capabilities, GrantStore, JsonStateCodec, SessionStore,
    SessionStoreExt, Snapshot, SnapshotListing, SnapshotQuery, SnapshotStatus, StateCodec,
};
use crate::tool::{IntoTool, Tool};

/// `out` with the age of the holds its turn answered, when it answered
/// holds saved at `held_since` and did not fail.
pub(crate) fn with_held_for(mut out: AgentOutput, held_since: Option<chrono::DateTime<chrono::Utc>>) -> AgentOutput {
    if let Some(since) = held_since
        && !out.is_failed()
    {
        out.held_for = (chrono::Utc::now() - since).to_std().ok().or(Some(Duration::ZERO));
    }
    out
}

/// What runs one turn of an agent. Prompt agents use a built-in handler;
/// custom agents supply their own (see [`Agent::custom`]).
#[async_trait]
pub trait TurnHandler: Send + Sync {
    /// Handles the turn's input, changing the session through `turn`.
    /// An `Err` fails the turn; its changes are discarded.
    async fn handle(&self, turn: Turn) -> Result<()>;
}

struct FnHandler<F>(F);

#[async_trait]
impl<F, Fut> TurnHandler for FnHandler<F>
where
    F: Fn(Turn) -> Fut + Send + Sync,
    Fut: Future<Output = Result<()>> + Send,
{
    async fn handle(&self, turn: Turn) -> Result<()> {
        (self.0)(turn).await
    }
}

#[derive(Clone)]
pub(crate) struct AgentDef {
    pub name: String,
    pub description: Option<String>,
    pub handler: Arc<dyn TurnHandler>,
    pub store: Option<Arc<dyn SessionStore>>,
    /// What `store` can do beyond the required trait, read once when the
    /// agent was built (none without a store).
    pub capabilities: Capabilities,
    pub codec: Arc<dyn StateCodec>,
    /// Where one-time claims of client-held state are recorded.
    pub claims: Option<Arc<dyn SessionStore>>,
    pub heartbeat: Duration,
    pub abort_wait: Duration,
    pub resume_lease: Duration,
    /// Whether an approval policy governs its tool calls.
    pub has_policy: bool,
    /// The definitions of the tools of a prompt agent (empty for a custom one).
    pub tools: Vec<crate::model::ToolDefinition>,
    /// The tools themselves, in the order of `tools`.
    pub runnable_tools: Vec<Arc<dyn Tool>>,
    /// The middleware around a prompt agent's tool calls, its rule gate
    /// (when it has a policy) first: what `Agent::call_tool` runs a call
    /// through. Empty for a custom agent.
    pub tool_middleware: Vec<Arc<dyn Middleware>>,
    /// The model of a prompt agent (`None` for a custom one).
    pub model: Option<Arc<dyn Model>>,
    /// Its foreground sub-agents, whose holds its answers reach
    /// (checked by `decide.rs` level by level).
    pub children: Vec<Agent>,
    /// Signs the approval receipts of calls that run after a hold.
    pub receipts: Option<Arc<dyn crate::receipt::ReceiptIssuer>>,
    /// The input paths masked in each tool's calls, by tool name (only
    /// tools that mask any).
    pub redactions: std::collections::HashMap<String, crate::review::Redaction>,
    /// The hooks through which runs nested in its tool calls (sub-agents)
    /// take part in its turns.
    pub nesting: Arc<dyn nesting::Nesting>,
}

impl AgentDef {
    /// The MCP server and tool behind the agent's tool `name`, for its
    /// audit records.
    pub(crate) fn mcp_origin(&self, name: &str) -> Option<crate::session::McpOrigin> {
        let definition = self.tools.iter().find(|d| d.name == name)?;
        crate::session::McpOrigin::of_metadata(definition.metadata.as_ref())
    }
}

/// An agent definition: immutable and cheap to clone.
#[derive(Clone)]
pub struct Agent {
    def: Arc<AgentDef>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.def.name)
            .field("server_managed", &self.def.store.is_some())
            .finish()
    }
}

impl Agent {
    /// Starts defining a prompt agent.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(name.into(), None)
    }

    /// Starts defining a custom agent whose turns run `f`.
    ///
    /// ```
    /// use holdpoint::agent::{Agent, AgentInit, AgentInput, Turn};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let counter = Agent::custom("counter", |turn: Turn| async move {
    ///     let next = turn.custom()["counter"].as_i64().unwrap_or(0) + 1;
    ///     turn.update_custom(|_| serde_json::json!({"counter": next}));
    ///     turn.reply_text("done");
    ///     Ok(())
    /// })
    /// .build()?;
    /// let out = counter.run(AgentInput::text("go"), AgentInit::new()).await?;
    /// assert_eq!(out.state.unwrap()["custom"]["counter"], 1);
    /// # Ok::<(), holdpoint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn custom<F, Fut>(name: impl Into<String>, f: F) -> AgentBuilder
    where
        F: Fn(Turn) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        AgentBuilder::new(name.into(), Some(Arc::new(FnHandler(f))))
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The agent's description.
    pub fn description(&self) -> Option<&str> {
        self.def.description.as_deref()
    }

    /// The definitions of its tools (name, description, input and output
    /// schemas), as the model sees them; empty for a custom agent.
    pub fn tool_definitions(&self) -> &[crate::model::ToolDefinition] {
        &self.def.tools
    }

    /// Its tools, to call one directly (a development tool lists and runs
    /// them); empty for a custom agent.
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.def.runnable_tools
    }

    /// The model of a prompt agent; `None` for a custom agent.
    pub fn model(&self) -> Option<&Arc<dyn Model>> {
        self.def.model.as_ref()
    }

    /// The same agent with another state codec (a server installs its
    /// signing codec this way).
    pub fn with_state_codec(&self, codec: Arc<dyn StateCodec>) -> Agent {
        let mut def = (*self.def).clone();
        def.codec = codec;
        Agent { def: Arc::new(def) }
    }

    /// The same agent, recording one-time claims of client-held state in
    /// `store` (a server installs this with its signing codec).
    ///
    /// A resume that answers interrupts from client-held state first saves
    /// a marker snapshot `state-claim:KEY` (KEY from
    /// [`StateCodec::claim_key`]) in `store`, before any tool runs; when the
    /// marker exists the turn fails with `ABORTED` ("already resumed"), so
    /// replaying the same signed state with the same approval does not run
    /// the call again. Every codec has a claim key: the default
    /// [`JsonStateCodec`] claims by the hash of the state's canonical JSON,
    /// so a replay re-serialised by the caller is refused too. Share one
    /// durable store between replicas. Agents with a session store claim
    /// their snapshots instead and ignore this.
    ///
    /// Claims are on by default: an agent without a session store records
    /// them in memory, which guards one process; this puts them in a
    /// durable store shared by every replica.
    pub fn with_state_claims(&self, store: Arc<dyn SessionStore>) -> Agent {
        let mut def = (*self.def).clone();
        def.claims = Some(store);
        Agent { def: Arc::new(def) }
    }

    /// The same agent without one-time claims of client-held state: a
    /// replay of the same state with the same answer runs the call again.
    /// An explicit opt-out, for callers that guard replays themselves
    /// (docs/reference.md §9).
    pub fn without_state_claims(&self) -> Agent {
        let mut def = (*self.def).clone();
        def.claims = None;
        Agent { def: Arc::new(def) }
    }

    /// Whether the agent keeps sessions in a store (server-managed state).
    pub fn is_server_managed(&self) -> bool {
        self.def.store.is_some()
    }

    /// The input paths masked wherever a call of `tool` is shown
    /// (docs/reference.md §22.1): the tool's own and those of every
    /// approval rule that may cover it. For surfaces that show a call
    /// before it is held (an AG-UI client's tool-call events).
    pub fn redaction_for(&self, tool: &str) -> Option<&crate::review::Redaction> {
        self.def.redactions.get(tool)
    }

    /// Whether an approval policy governs its tool calls
    /// ([`AgentBuilder::approval_policy`]).
    pub fn has_approval_policy(&self) -> bool {
        self.def.has_policy
    }

    /// The session store, for server-managed agents.
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.def.store.as_ref()
    }

    /// What the agent's store can do beyond the required trait (read when
    /// the agent was built; none for a client-managed agent).
    pub fn capabilities(&self) -> &Capabilities {
        &self.def.capabilities
    }

    /// Opens a connection: loads the session named by `init` and starts
    /// the worker that processes inputs one at a time. Init errors (unknown
    /// snapshot, `state` sent to a server-managed agent, …) fail here.
    pub async fn connect(&self, init: AgentInit) -> Result<Connection> {
        self.connect_with(RunOptions::new(init)).await
    }

    /// [`connect`](Self::connect) with [`RunOptions`]: where to start and
    /// the request context (the principal and anything else tools and
    /// middleware should see).
    pub async fn connect_with(&self, options: RunOptions) -> Result<Connection> {
        let RunOptions { init, context } = options;
        let session = load::load(&self.def, init, principal_of(&context)).await?;
        Ok(Connection::start(Arc::clone(&self.def), session, Arc::new(context)))
    }

    /// Runs one input in a new or loaded session and returns its output.
    ///
    /// A turn that fails is [`Error::TurnFailed`], carrying the failed
    /// output; init errors (unknown snapshot, …) are the plain error.
    pub async fn run(&self, input: AgentInput, init: AgentInit) -> Result<AgentOutput> {
        self.run_with(input, RunOptions::new(init)).await
    }

    /// [`run`](Self::run) with [`RunOptions`]: where to start and the
    /// request context (principal, …).
    ///
    /// ```
    /// use holdpoint::agent::{Agent, AgentInit, AgentInput, RunOptions, Turn};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let whoami = Agent::custom("whoami", |turn: Turn| async move {
    ///     let who = holdpoint::agent::principal_of(&turn.request_context()).unwrap_or("nobody").to_owned();
    ///     turn.reply_text(who);
    ///     Ok(())
    /// })
    /// .build()?;
    /// let options = RunOptions::new(AgentInit::new()).principal("alice");
    /// let out = whoami.run_with(AgentInput::text("hi"), options).await?;
    /// assert_eq!(out.text(), "alice");
    /// # Ok::<(), holdpoint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn run_with(&self, input: AgentInput, options: RunOptions) -> Result<AgentOutput> {
        input.validate()?;
        let RunOptions { init, context } = options;
        let (session, context) = load::load_for(&self.def, init, context, &input).await?;
        self.drive(session, input, context, None).await
    }

    /// [`run_with`](Self::run_with) as a foreground sub-agent call: the
    /// child's outcome row goes to `parent`, its parent's turn, to be
    /// written with the parent's own (see `subagent::defer`); a resume
    /// starts from `preloaded`, the child snapshot its parent's claim
    /// checked, when that is the one `options` names.
    pub(crate) async fn run_as_child(
        &self,
        input: AgentInput,
        options: RunOptions,
        parent: Option<Arc<handoff::HandedUp>>,
        preloaded: Option<crate::session::Snapshot>,
    ) -> Result<AgentOutput> {
        input.validate()?;
        let RunOptions { init, context } = options;
        let principal = principal_of(&context);
        let session = match preloaded {
            Some(snapshot) if init.snapshot_id.as_deref() == Some(snapshot.snapshot_id.as_str()) => {
                load::from_read(&self.def, snapshot, principal)?
            }
            _ => load::load(&self.def, init, principal).await?,
        };
        self.drive(session, input, context, parent).await
    }

    /// Runs one input on a loaded session in the caller's task (only what
    /// is left after a detach is spawned).
    async fn drive(
        &self,
        session: load::Session,
        input: AgentInput,
        context: Map<String, Value>,
        parent: Option<Arc<handoff::HandedUp>>,
    ) -> Result<AgentOutput> {
        let held_since = input.resume.as_ref().filter(|r| !r.is_empty()).and(session.saved_at);
        let (mut work, mut output) = worker::single(Arc::clone(&self.def), session, Arc::new(context), input, parent);
        let out = tokio::select! {
            biased;
            () = &mut work => {
                // The worker finished, so its output was sent (or never
                // will be): read it without awaiting (an await would spend
                // the task's tokio budget, and a task running many turns
                // would be made to yield).
                output
                    .try_recv()
                    .unwrap_or_else(|_| Err(Error::Internal("the agent stopped without an output".into())))
            }
            out = &mut output => {
                // Detached: the output is out, the run goes on in the background.
                tokio::spawn(work);
                out.unwrap_or_else(|_| Err(Error::Internal("the agent stopped without an output".into())))
            }
        };
        out.and_then(|o| with_held_for(o, held_since).into_result())
    }

    /// Runs one user text in a new conversation.
    pub async fn run_text(&self, text: impl Into<String>) -> Result<AgentOutput> {
        self.run(AgentInput::text(text), AgentInit::new()).await
    }

    /// The store's listing, for the operator verbs that list snapshots.
    fn require_listing(&self) -> Result<&Arc<dyn SnapshotListing>> {
        self.require_store()?;
        self.needs(self.def.capabilities.listing())
    }

    /// The store's audit trail, for the operator verbs that read it.
    fn require_audit(&self) -> Result<&Arc<dyn AuditStore>> {
        self.require_store()?;
        self.needs(self.def.capabilities.audit())
    }

    /// The store's standing grants.
    fn require_grants(&self) -> Result<&Arc<dyn GrantStore>> {
        self.require_store()?;
        self.needs(self.def.capabilities.grants())
    }

    /// `found`, its missing capability named as this agent's.
    fn needs<T>(&self, found: Result<T>) -> Result<T> {
        crate::session::needed_by(found, format!("agent \"{}\"", self.def.name))
    }

    fn require_store(&self) -> Result<&Arc<dyn SessionStore>> {
        self.def.store.as_ref().ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "agent \"{}\" keeps no sessions (client-managed state); it has no snapshots",
                self.def.name
            ))
        })
    }
}
