//! [`AgentBuilder`]: how an agent is put together (docs/reference.md §5).

use super::*;

/// Builds an [`Agent`].
pub struct AgentBuilder {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) custom: Option<Arc<dyn TurnHandler>>,
    pub(super) model: Option<Arc<dyn Model>>,
    pub(super) system: Option<String>,
    pub(super) tools: Vec<Arc<dyn Tool>>,
    /// The agents added with `background_subagent` (their tools are in
    /// `tools`), whose settled tasks turns tell of (§16.7).
    pub(super) background: Vec<Agent>,
    /// The agents added with `subagent` (their tools are in `tools`).
    pub(super) children: Vec<Agent>,
    pub(super) middleware: Vec<Arc<dyn Middleware>>,
    pub(super) policy: Option<Arc<Policy>>,
    pub(super) max_turns: u32,
    pub(super) config: Option<Value>,
    pub(super) store: Option<Arc<dyn SessionStore>>,
    pub(super) codec: Arc<dyn StateCodec>,
    pub(super) heartbeat: Duration,
    pub(super) abort_wait: Duration,
    pub(super) resume_lease: Duration,
    pub(super) receipts: Option<Arc<dyn crate::receipt::ReceiptIssuer>>,
}

impl AgentBuilder {
    pub(super) fn new(name: String, custom: Option<Arc<dyn TurnHandler>>) -> Self {
        AgentBuilder {
            name,
            description: None,
            custom,
            model: None,
            system: None,
            tools: Vec::new(),
            background: Vec::new(),
            children: Vec::new(),
            middleware: Vec::new(),
            policy: None,
            max_turns: crate::generate::DEFAULT_MAX_TURNS,
            config: None,
            store: None,
            codec: Arc::new(JsonStateCodec),
            heartbeat: Duration::from_secs(30),
            abort_wait: Duration::from_secs(5),
            resume_lease: crate::session::HEARTBEAT_EXPIRY,
            receipts: None,
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
    /// needs the rule's quorum (see [`Decisions::answer`]). Prompt agents only.
    pub fn approval_policy(mut self, policy: Policy) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Issues an approval receipt (docs/reference.md, "Approval receipts")
    /// to every call that runs after a hold was answered — approved,
    /// edited, or restarted with the tool's own answer — or that a standing
    /// grant let through: the tool reads it with
    /// [`ToolContext::receipt`](crate::tool::ToolContext::receipt). Denied,
    /// expired and responded calls (which do not run) get none. Usually a
    /// [`ReceiptSigner`](crate::receipt::ReceiptSigner).
    pub fn receipts(mut self, issuer: Arc<dyn crate::receipt::ReceiptIssuer>) -> Self {
        self.receipts = Some(issuer);
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
    /// (docs/reference.md §8, [`Decisions::in_doubt`]).
    pub fn resume_lease(mut self, lease: Duration) -> Self {
        self.resume_lease = lease;
        self
    }

    /// The heartbeat period of detached runs (default 30 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// Builds the agent. A prompt agent needs a model; a server-managed
    /// agent under an approval policy needs a store with an audit trail
    /// and standing grants ([`Error::MissingCapability`] otherwise).
    pub fn build(mut self) -> Result<Agent> {
        if self.name.is_empty() {
            return Err(Error::InvalidArgument("an agent needs a name".into()));
        }
        // Only prompt agents run their tool calls through the rule gate.
        let has_policy = self.policy.is_some() && self.custom.is_none();
        // What the store can do is read once, here: the policy's partial
        // approvals are audited saves and its answers may leave grants.
        let capabilities = self.store.as_ref().map(|s| s.capabilities()).unwrap_or_default();
        if self.store.is_some() && has_policy {
            let who = format!("agent \"{}\"'s approval policy", self.name);
            crate::session::needed_by(capabilities.audit(), who.clone())?;
            crate::session::needed_by(capabilities.grants(), who)?;
        }
        let definitions = self.tools.iter().map(|t| t.definition().clone()).collect();
        let runnable_tools = if self.custom.is_none() {
            self.tools.clone()
        } else {
            Vec::new()
        };
        let kept_model = if self.custom.is_none() {
            self.model.clone()
        } else {
            None
        };
        let Handler {
            handler,
            tool_middleware,
            redactions,
        } = self.handler(has_policy, &capabilities)?;
        // Nothing runs twice by default: a client-held agent claims each
        // state it resumes from in memory (one process); a server installs
        // its durable store instead (`Agent::with_state_claims`).
        let claims: Option<Arc<dyn SessionStore>> = match &self.store {
            None => Some(Arc::new(crate::session::InMemoryStore::new())),
            Some(_) => None,
        };
        Ok(Agent {
            def: Arc::new(AgentDef {
                name: self.name,
                description: self.description,
                handler,
                store: self.store,
                capabilities,
                codec: self.codec,
                claims,
                heartbeat: self.heartbeat,
                abort_wait: self.abort_wait,
                resume_lease: self.resume_lease,
                has_policy,
                tools: definitions,
                runnable_tools,
                tool_middleware,
                model: kept_model,
                children: self.children,
                receipts: self.receipts,
                redactions,
                nesting: Arc::new(subagent::SubAgents),
            }),
        })
    }

    /// The turn handler: a custom agent's own, or a prompt agent's over
    /// its model and tools, with the middleware around its tool calls (its
    /// rule gate first under a policy: what a direct tool call runs
    /// through, `Agent::call_tool`) and the paths masked in its calls.
    fn handler(&mut self, has_policy: bool, capabilities: &crate::session::Capabilities) -> Result<Handler> {
        if let Some(handler) = self.custom.take() {
            return Ok(Handler {
                handler,
                tool_middleware: Vec::new(),
                redactions: std::collections::HashMap::new(),
            });
        }
        let Some(model) = self.model.take() else {
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
        let mut middleware = std::mem::take(&mut self.middleware);
        let redactions = redactions_of(&self.name, &self.tools, self.policy.as_deref());
        if let Some(policy) = self.policy.take() {
            let self_asking = self
                .tools
                .iter()
                .filter(|t| t.approval_reply().is_some())
                .map(|t| t.name().to_owned())
                .collect();
            let tool_metadata = self
                .tools
                .iter()
                .filter_map(|t| Some((t.name().to_owned(), t.definition().metadata.clone()?)))
                .collect();
            let gate = crate::approval::RuleGate::new(
                self.name.clone(),
                policy,
                self_asking,
                tool_metadata,
                self.store.clone(),
                capabilities.grants.clone(),
            );
            middleware.insert(0, Arc::new(gate));
        }
        let tool_middleware = middleware.clone();
        let handler = Arc::new(prompt::PromptHandler {
            model,
            system: self.system.take(),
            toolset: Arc::new(crate::generate::Toolset::new(&self.tools)),
            tools: std::mem::take(&mut self.tools),
            background: subagent::Notices::new(std::mem::take(&mut self.background)),
            middleware,
            max_turns: self.max_turns,
            config: self.config.take(),
            session_in_context: has_policy,
        });
        Ok(Handler {
            handler,
            tool_middleware,
            redactions,
        })
    }
}

/// What [`AgentBuilder::handler`] builds.
struct Handler {
    handler: Arc<dyn TurnHandler>,
    tool_middleware: Vec<Arc<dyn crate::middleware::Middleware>>,
    redactions: std::collections::HashMap<String, crate::review::Redaction>,
}

/// The paths masked in calls of each tool of agent `agent` that has any:
/// its [`HoldView`](crate::review::HoldView)'s, and those of every rule of
/// `policy` that may cover it (docs/reference.md §22.1).
fn redactions_of(
    agent: &str,
    tools: &[Arc<dyn crate::Tool>],
    policy: Option<&crate::approval::Policy>,
) -> std::collections::HashMap<String, crate::review::Redaction> {
    let mut out = std::collections::HashMap::new();
    for tool in tools {
        let name = tool.name();
        let mut redaction = tool.hold_view().map(|v| v.redaction().clone()).unwrap_or_default();
        for rule in policy.map(crate::approval::Policy::rules).unwrap_or_default() {
            let covers = rule.agent.as_ref().is_none_or(|p| p.matches(agent))
                && rule.tool.as_ref().is_none_or(|p| p.matches(name));
            if covers {
                redaction.extend(&rule.redact);
            }
        }
        if !redaction.is_empty() {
            out.insert(name.to_owned(), redaction);
        }
    }
    out
}
