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

mod answer;
mod audit;
mod connection;
mod detach;
mod hold;
mod io;
mod load;
mod prompt;
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

pub use answer::{Answer, AnswerKind, Answered};
pub use audit::{PendingApproval, TOOL_APPROVED};
pub use connection::Connection;
pub use io::{AgentInit, AgentInput, AgentOutput, AgentStreamChunk, FailureReason, TurnEnd, TurnStart};
pub use turn::{Responder, Turn};

use crate::approval::Policy;
use crate::error::{Error, Result};
use crate::generate::Resume;
use crate::middleware::Middleware;
use crate::model::Model;
use crate::session::{
    AuditDecision, AuditQuery, AuditRecord, JsonStateCodec, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus,
    StateCodec,
};
use crate::tool::{IntoTool, Tool};

/// The request-context key holding the authenticated principal (a string).
/// Sessions belong to the principal that starts them.
pub const PRINCIPAL: &str = "principal";

/// The request-context key naming the individual who acts (an approver's
/// user name, say) when it differs from the owning principal; recorded in
/// the audit trail.
pub const ACTOR: &str = "actor";

/// The principal in a request context.
pub fn principal_of(context: &Map<String, Value>) -> Option<&str> {
    context.get(PRINCIPAL).and_then(Value::as_str)
}

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

/// On whose behalf a read or an abort acts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Access<'a> {
    /// Every snapshot this agent wrote (the agent's own process, operators).
    #[default]
    Full,
    /// What this principal may see (`None`: an anonymous caller, who sees
    /// only unowned sessions).
    As(Option<&'a str>),
    /// What a caller with roles may see: its own sessions (as
    /// [`Access::As`]), and a held snapshot of anyone's whose paused call
    /// an approval rule lets these roles answer (docs/reference.md §10.7) —
    /// that snapshot and its transcript, nothing else of the session.
    Caller {
        /// The caller's principal.
        principal: Option<&'a str>,
        /// The caller's roles.
        roles: &'a [String],
    },
}

impl<'a> Access<'a> {
    /// The access of the caller a request context describes: its principal
    /// and roles ([`crate::approval::ROLES`]).
    pub fn of(context: &'a Map<String, Value>, roles: &'a [String]) -> Self {
        Access::Caller {
            principal: principal_of(context),
            roles,
        }
    }

    /// Whether this access may read `snapshot`.
    pub fn sees(self, snapshot: &Snapshot) -> bool {
        match self {
            Access::Full => true,
            Access::As(principal) => snapshot.visible_to(principal),
            Access::Caller { principal, roles } => {
                snapshot.visible_to(principal) || (!roles.is_empty() && approves_a_hold_of(snapshot, roles))
            }
        }
    }

    /// Whether this access may see the paused call `call` in a listing.
    pub fn sees_call(self, call: &PendingApproval) -> bool {
        match self {
            Access::Full => true,
            Access::As(principal) => call.owner.is_none() || call.owner.as_deref() == principal,
            Access::Caller { principal, roles } => {
                call.owner.is_none()
                    || call.owner.as_deref() == principal
                    || call.rule.as_ref().is_some_and(|r| r.is_approver(roles))
            }
        }
    }

    /// Whether this access acts for the owner of `snapshot` (or is
    /// [`Access::Full`]): what an abort needs.
    fn owns(self, snapshot: &Snapshot) -> bool {
        match self {
            Access::Full => true,
            Access::As(principal) | Access::Caller { principal, .. } => snapshot.visible_to(principal),
        }
    }
}

/// Whether `snapshot` waits on a paused call whose rule `roles` approve.
fn approves_a_hold_of(snapshot: &Snapshot, roles: &[String]) -> bool {
    let Some(state) = &snapshot.state else { return false };
    let Some(last) = state
        .messages
        .iter()
        .rev()
        .find(|m| m.role == crate::message::Role::Model)
    else {
        return false;
    };
    last.interrupts()
        .filter_map(crate::approval::HoldRule::on)
        .any(|rule| rule.is_approver(roles))
}

/// Where a run or a connection starts and on whose behalf: the
/// [`AgentInit`] and the request context that tools and middleware see
/// (the principal under [`PRINCIPAL`], the acting person under [`ACTOR`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOptions {
    /// Where the run starts.
    pub init: AgentInit,
    /// The request context.
    pub context: Map<String, Value>,
}

impl RunOptions {
    /// Starts at `init` with an empty context.
    pub fn new(init: AgentInit) -> Self {
        RunOptions {
            init,
            context: Map::new(),
        }
    }

    /// The same options with this request context (replacing the old one).
    pub fn context(mut self, context: Map<String, Value>) -> Self {
        self.context = context;
        self
    }

    /// The same options acting for `principal` (sets [`PRINCIPAL`] in the
    /// context): sessions it starts belong to it, others' read as unknown.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.context
            .insert(PRINCIPAL.to_owned(), Value::String(principal.into()));
        self
    }
}

impl From<AgentInit> for RunOptions {
    fn from(init: AgentInit) -> Self {
        RunOptions::new(init)
    }
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
    pub codec: Arc<dyn StateCodec>,
    /// Where one-time claims of client-held state are recorded.
    pub claims: Option<Arc<dyn SessionStore>>,
    pub heartbeat: Duration,
    pub abort_wait: Duration,
    pub resume_lease: Duration,
    /// The definitions of the tools of a prompt agent (empty for a custom one).
    pub tools: Vec<crate::model::ToolDefinition>,
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
    pub fn with_state_claims(&self, store: Arc<dyn SessionStore>) -> Agent {
        let mut def = (*self.def).clone();
        def.claims = Some(store);
        Agent { def: Arc::new(def) }
    }

    /// Whether the agent keeps sessions in a store (server-managed state).
    pub fn is_server_managed(&self) -> bool {
        self.def.store.is_some()
    }

    /// The session store, for server-managed agents.
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.def.store.as_ref()
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
        let session = load::load(&self.def, init, principal_of(&context)).await?;
        self.drive(session, input, context).await
    }

    /// Runs one input on a loaded session in the caller's task (only what
    /// is left after a detach is spawned).
    async fn drive(
        &self,
        session: load::Session,
        input: AgentInput,
        context: Map<String, Value>,
    ) -> Result<AgentOutput> {
        let held_since = input.resume.as_ref().filter(|r| !r.is_empty()).and(session.saved_at);
        let (mut work, mut output) = worker::single(Arc::clone(&self.def), session, Arc::new(context), input);
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

    fn require_store(&self) -> Result<&Arc<dyn SessionStore>> {
        self.def.store.as_ref().ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "agent \"{}\" keeps no sessions (client-managed state); it has no snapshots",
                self.def.name
            ))
        })
    }

    /// A stored snapshot of this agent by id, as `access` may see it:
    /// `None` for an unknown id, for a row this agent did not write
    /// (another agent's of a shared store, one without `agent`, a claim
    /// marker; see [`Snapshot::belongs_to`]), and under [`Access::As`] for
    /// another principal's (so ids cannot be probed).
    pub async fn snapshot(&self, snapshot_id: &str, access: Access<'_>) -> Result<Option<Snapshot>> {
        Ok(self
            .require_store()?
            .get_snapshot(snapshot_id)
            .await?
            .filter(|s| s.belongs_to(&self.def.name) && access.sees(s)))
    }

    /// The latest snapshot of a session of this agent, as `access` may see
    /// it: `None` for an unknown session and when its latest row is not
    /// this agent's or not visible (see [`snapshot`](Self::snapshot)).
    pub async fn latest_snapshot(&self, session_id: &str, access: Access<'_>) -> Result<Option<Snapshot>> {
        Ok(self
            .require_store()?
            .get_latest_snapshot(session_id)
            .await?
            .filter(|s| s.belongs_to(&self.def.name) && access.sees(s)))
    }

    /// The paused calls of this agent's sessions that wait for an answer,
    /// newest first. `query.agent` is set to this agent; set `owner` to list
    /// one principal's, `session_id` for one session's.
    pub async fn pending(&self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.def.name.clone()),
            waiting_only: true,
            ..query
        };
        let snapshots = self.require_store()?.list_snapshots(&query).await?;
        Ok(snapshots
            .iter()
            .filter(|s| s.belongs_to(&self.def.name))
            .flat_map(audit::pending_of)
            .collect())
    }

    /// The paused calls `access` may answer or watch, newest first: its own
    /// sessions', and for a caller with roles also those of anyone's whose
    /// approval rule names one of them (docs/reference.md §10.7). `query`
    /// narrows it as for [`pending`](Self::pending); its `owner` is
    /// ignored for a caller with roles.
    pub async fn pending_for(&self, query: SnapshotQuery, access: Access<'_>) -> Result<Vec<PendingApproval>> {
        let query = match access {
            Access::Full => query,
            Access::As(principal) | Access::Caller { principal, roles: [] } => SnapshotQuery {
                owner: principal.map(str::to_owned),
                ..query
            },
            Access::Caller { .. } => SnapshotQuery { owner: None, ..query },
        };
        let mut calls = self.pending(query).await?;
        calls.retain(|c| access.sees_call(c));
        Ok(calls)
    }

    /// Answers one paused call on behalf of the caller `context` describes
    /// (its principal, roles and actor): see [`Answer`] and
    /// docs/reference.md §10.7. A call held under an approval rule is
    /// answered only by an approver (or its owner, when self-approval is
    /// on): `PERMISSION_DENIED` naming the rule otherwise, with nothing
    /// changed; a snapshot the caller may not see is `NOT_FOUND`. An
    /// approval short of the rule's quorum is recorded on the snapshot (one
    /// audit row) and answered [`Answered::Recorded`]; the approval that
    /// completes it, or any authorised denial, resumes the session as its
    /// owner, with the approver as the actor ([`Answered::Resumed`]). An
    /// expired hold cannot be approved (`FAILED_PRECONDITION`).
    pub async fn answer(&self, answer: Answer, context: Map<String, Value>) -> Result<Answered> {
        answer::answer(self, answer, context).await
    }

    /// The paused calls of this agent's sessions that are *in doubt*
    /// (docs/reference.md §8): a resume claimed them, its process stopped renewing the
    /// claim (it died mid-resume), and nothing was written after — so the
    /// resumed tools may or may not have run. They are never re-run on
    /// their own and an ordinary resume is refused (`ABORTED`); an operator
    /// settles them with [`settle`](Self::settle). Each entry has
    /// `in_doubt` set and the decisions recorded for it in `decided`.
    pub async fn in_doubt(&self, query: SnapshotQuery) -> Result<Vec<PendingApproval>> {
        let query = SnapshotQuery {
            agent: Some(self.def.name.clone()),
            ..query
        };
        let mut calls = PendingApproval::list_in_doubt(self.require_store()?.as_ref(), query).await?;
        // A new message's claim on calls it abandoned lapses only when that
        // turn's process died: its own tools may be in doubt, the abandoned
        // calls are not (they never run).
        calls.retain(|c| {
            c.agent.as_deref() == Some(self.def.name.as_str())
                && !c.decided.iter().any(|r| r.decision == AuditDecision::Abandoned)
        });
        Ok(calls)
    }

    /// Settles calls left in doubt (see [`in_doubt`](Self::in_doubt)) on
    /// behalf of the principal in `context`: `resume` answers the paused
    /// calls of `snapshot_id` — `respond` with the result the operator found
    /// (the call ran), or `restart` to run it again deliberately — and the
    /// turn continues from there. The lapsed claim is taken over atomically
    /// (a second settlement, or one racing a still-live resume, fails), and
    /// the audit records are marked `settles`. A resume that was only
    /// frozen and wakes afterwards writes nothing: its turn fails with
    /// `FAILED_PRECONDITION`.
    ///
    /// Fails with `FAILED_PRECONDITION` when the snapshot is not in doubt
    /// (never resumed, its claim still held, its resume finished, or a new
    /// message abandoned its calls),
    /// `NOT_FOUND` for an unknown or foreign snapshot.
    pub async fn settle(&self, snapshot_id: &str, resume: Resume, context: Map<String, Value>) -> Result<AgentOutput> {
        settle::settle(self, snapshot_id, resume, context).await
    }

    /// This agent's audit trail, newest first (`query.agent` is set to it).
    pub async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>> {
        let query = AuditQuery {
            agent: Some(self.def.name.clone()),
            ..query
        };
        self.require_store()?.list_audit(&query).await
    }

    /// Aborts a detached run. Returns the status the snapshot had (`None`
    /// for an unknown id, and for a row `access` may not see: see
    /// [`snapshot`](Self::snapshot)). For a pending run it waits briefly
    /// for the worker to settle the row as `aborted`.
    pub async fn abort(&self, snapshot_id: &str, access: Access<'_>) -> Result<Option<SnapshotStatus>> {
        let owned = self.snapshot(snapshot_id, access).await?.filter(|s| access.owns(s));
        if owned.is_none() {
            return Ok(None);
        }
        self.abort_checked(snapshot_id).await
    }

    /// [`abort`](Self::abort) of a snapshot already checked to be this
    /// agent's (a row's agent never changes once written).
    async fn abort_checked(&self, snapshot_id: &str) -> Result<Option<SnapshotStatus>> {
        let store = self.require_store()?;
        let previous = store.abort(snapshot_id).await?;
        if previous == Some(SnapshotStatus::Pending) {
            let mut statuses = store.watch_status(snapshot_id).await?;
            let settle = async {
                while let Some(status) = statuses.next().await {
                    if status.is_terminal() {
                        break;
                    }
                }
            };
            if tokio::time::timeout(self.def.abort_wait, settle).await.is_err() {
                tracing::warn!(snapshot_id, "abort requested; the run has not settled yet");
            }
        }
        Ok(previous)
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    name: String,
    description: Option<String>,
    custom: Option<Arc<dyn TurnHandler>>,
    model: Option<Arc<dyn Model>>,
    system: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    middleware: Vec<Arc<dyn Middleware>>,
    policy: Option<Arc<Policy>>,
    max_turns: u32,
    config: Option<Value>,
    store: Option<Arc<dyn SessionStore>>,
    codec: Arc<dyn StateCodec>,
    heartbeat: Duration,
    abort_wait: Duration,
    resume_lease: Duration,
}

impl AgentBuilder {
    fn new(name: String, custom: Option<Arc<dyn TurnHandler>>) -> Self {
        AgentBuilder {
            name,
            description: None,
            custom,
            model: None,
            system: None,
            tools: Vec::new(),
            middleware: Vec::new(),
            policy: None,
            max_turns: crate::generate::DEFAULT_MAX_TURNS,
            config: None,
            store: None,
            codec: Arc::new(JsonStateCodec),
            heartbeat: Duration::from_secs(30),
            abort_wait: Duration::from_secs(5),
            resume_lease: crate::session::HEARTBEAT_EXPIRY,
        }
    }

    /// A description, for listings and the HTTP API.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The model (prompt agents).
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// The system prompt (prompt agents).
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Adds a tool: a typed tool, a [`DynamicTool`](crate::tool::DynamicTool),
    /// or an `Arc<dyn Tool>` (anything [`IntoTool`]).
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds tools of one type: `.tools([balance, transfer])` for typed
    /// tools, or `Arc<dyn Tool>`s to mix types (see [`IntoTool`]).
    pub fn tools<T: IntoTool>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools.extend(tools.into_iter().map(IntoTool::into_tool));
        self
    }

    /// Adds a middleware (the first added is the outermost).
    pub fn middleware(mut self, middleware: Arc<dyn Middleware>) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Governs tool calls with an approval policy (docs/reference.md §10.5):
    /// before any middleware sees a call, the first rule that covers it
    /// holds it (also when ToolApproval's allowlist would let it run, and
    /// with no ToolApproval at all), recording the rule's name, approvers,
    /// quorum and self-approval on the hold under `approvalRule`. A tool
    /// that asks for approval itself (it declares an
    /// [`ApprovalReply`](crate::approval::ApprovalReply)) runs and pauses
    /// as before, its interrupt annotated with the rule. A condition that
    /// fails to evaluate holds the call under its rule, with the error. No
    /// match keeps the agent's behaviour without a policy. Answers to such
    /// holds are checked when the resume claims them: the actor must be an
    /// approver (or the owner, when self-approval is on), and an approval
    /// needs the rule's quorum (see [`Agent::answer`]). Prompt agents only.
    pub fn approval_policy(mut self, policy: Policy) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// The limit on tool-call rounds per turn (default 5).
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = max_turns;
        self
    }

    /// Model config (temperature, …).
    pub fn config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }

    /// Keeps sessions in `store` (server-managed state). Without a store
    /// the agent is client-managed: its state travels in `AgentOutput.state`.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// How client-held state is encoded and checked (the server signs it).
    pub fn state_codec(mut self, codec: Arc<dyn StateCodec>) -> Self {
        self.codec = codec;
        self
    }

    /// How long a resume's claim holds without renewal (default 60 s). The
    /// resuming worker renews it every third of this while the resumed turn
    /// runs; if the process dies, its calls read as in doubt once it lapses
    /// (docs/reference.md §8, [`Agent::in_doubt`]).
    pub fn resume_lease(mut self, lease: Duration) -> Self {
        self.resume_lease = lease;
        self
    }

    /// The heartbeat period of detached runs (default 30 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// Builds the agent. A prompt agent needs a model.
    pub fn build(self) -> Result<Agent> {
        if self.name.is_empty() {
            return Err(Error::InvalidArgument("an agent needs a name".into()));
        }
        let definitions = self.tools.iter().map(|t| t.definition().clone()).collect();
        let handler: Arc<dyn TurnHandler> = match self.custom {
            Some(h) => h,
            None => {
                let Some(model) = self.model else {
                    return Err(Error::InvalidArgument(format!("agent \"{}\" needs a model", self.name)));
                };
                let mut names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
                names.sort_unstable();
                if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
                    return Err(Error::InvalidArgument(format!(
                        "agent \"{}\" has two tools named \"{}\"",
                        self.name, w[0]
                    )));
                }
                let mut middleware = self.middleware;
                if let Some(policy) = self.policy {
                    let self_asking = self
                        .tools
                        .iter()
                        .filter(|t| t.approval_reply().is_some())
                        .map(|t| t.name().to_owned())
                        .collect();
                    let gate = crate::approval::RuleGate::new(self.name.clone(), policy, self_asking);
                    middleware.insert(0, Arc::new(gate));
                }
                Arc::new(prompt::PromptHandler {
                    model,
                    system: self.system,
                    toolset: Arc::new(crate::generate::Toolset::new(&self.tools)),
                    tools: self.tools,
                    middleware,
                    max_turns: self.max_turns,
                    config: self.config,
                })
            }
        };
        Ok(Agent {
            def: Arc::new(AgentDef {
                name: self.name,
                description: self.description,
                handler,
                store: self.store,
                codec: self.codec,
                claims: None,
                heartbeat: self.heartbeat,
                abort_wait: self.abort_wait,
                resume_lease: self.resume_lease,
                tools: definitions,
            }),
        })
    }
}
