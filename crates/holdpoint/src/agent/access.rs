//! On whose behalf an agent acts: the principal and actor keys of the
//! request context, [`Access`] for reads and aborts, and the per-call
//! [`RunOptions`] (docs/reference.md §5, §10.7).

use serde_json::{Map, Value};

use super::*;

pub use crate::hold::{ACTOR, PRINCIPAL, principal_of};

/// On whose behalf a read or an abort acts.
///
/// In process, the agent's own code reads everything ([`Access::Full`], the
/// default); a server reads as its caller. A [`Caller`] gives its access
/// with [`Caller::access`], and the reads take `&caller` directly:
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::agent::{Access, Agent, AgentInit, AgentInput, Caller, RunOptions, Turn};
/// use holdpoint::session::InMemoryStore;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let echo = Agent::custom("echo", |turn: Turn| async move {
///     turn.reply_text("hi");
///     Ok(())
/// })
/// .store(Arc::new(InMemoryStore::new()))
/// .build()?;
/// let alice = Caller::new("alice");
/// let out = echo
///     .run_with(AgentInput::text("hi"), RunOptions::new(AgentInit::new()).caller(alice.clone()))
///     .await?;
/// let id = out.snapshot_id.clone().expect("a stored snapshot");
///
/// // Alice reads her own session; Bob is told it does not exist.
/// assert!(echo.snapshot(&id, &alice).await?.is_some());
/// assert!(echo.snapshot(&id, &Caller::new("bob")).await?.is_none());
/// assert!(echo.snapshot(&id, Access::As(Some("bob"))).await?.is_none());
/// // The agent's own process reads everything.
/// assert!(echo.snapshot(&id, Access::Full).await?.is_some());
/// assert_eq!(echo.latest(&out.session_id).await?.map(|s| s.snapshot_id), Some(id));
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
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

    /// Whether this access may settle `call`, a call in doubt
    /// (docs/reference.md §10.10): the roles that could answer its hold and
    /// the [`OPERATOR_ROLE`](super::OPERATOR_ROLE); its owner only when they
    /// could have answered it (no rule, or a rule that allows self-approval).
    pub fn may_settle(self, call: &PendingApproval) -> bool {
        match self {
            Access::Full => true,
            Access::As(principal) => {
                call.owner.is_none()
                    || (call.owner.as_deref() == principal && call.rule.as_ref().is_none_or(|r| r.self_approval))
            }
            Access::Caller { principal, roles } => {
                if roles.iter().any(|r| r == super::OPERATOR_ROLE) {
                    return true;
                }
                match &call.rule {
                    Some(rule) => match principal {
                        Some(p) => rule.may_answer(p, call.owner.as_deref(), roles).is_ok(),
                        None => rule.is_approver(roles),
                    },
                    None => call.owner.is_none() || call.owner.as_deref() == principal,
                }
            }
        }
    }

    /// Whether this access may act on `snapshot` as a settlement: what it
    /// sees, and for an operator every snapshot.
    pub(super) fn sees_to_settle(self, snapshot: &Snapshot) -> bool {
        match self {
            Access::Caller { roles, .. } if roles.iter().any(|r| r == super::OPERATOR_ROLE) => true,
            other => other.sees(snapshot),
        }
    }

    /// Whether this access acts for the owner of `snapshot` (or is
    /// [`Access::Full`]): what an abort needs.
    pub(super) fn owns(self, snapshot: &Snapshot) -> bool {
        match self {
            Access::Full => true,
            Access::As(principal) | Access::Caller { principal, .. } => snapshot.visible_to(principal),
        }
    }
}

/// Whether `snapshot` waits on a paused call whose rule `roles` approve,
/// its own or one a sub-agent surfaced into it (docs/reference.md §16.2).
fn approves_a_hold_of(snapshot: &Snapshot, roles: &[String]) -> bool {
    if snapshot.state.is_none() {
        return false;
    }
    super::audit::pending_raw_of(snapshot)
        .iter()
        .any(|call| call.rule.as_ref().is_some_and(|rule| rule.is_approver(roles)))
}

/// Where a run or a connection starts and on whose behalf: the
/// [`AgentInit`] and the request context that tools and middleware see
/// (the principal under [`PRINCIPAL`], the roles under
/// [`ROLES`](crate::approval::ROLES), the acting person under [`ACTOR`]).
/// Set who calls with [`caller`](Self::caller), or piece by piece with
/// [`principal`](Self::principal) and [`roles`](Self::roles).
///
/// ```
/// use holdpoint::agent::{Agent, AgentInit, AgentInput, Caller, RunOptions, Turn};
/// use serde_json::json;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let whoami = Agent::custom("whoami", |turn: Turn| async move {
///     let who = Caller::from_context(&turn.request_context());
///     turn.reply_text(format!("{} {:?}", who.principal().unwrap_or("nobody"), who.roles()));
///     Ok(())
/// })
/// .build()?;
///
/// let options = RunOptions::new(AgentInit::new()).caller(Caller::new("alice").with_roles(["customer"]));
/// let out = whoami.run_with(AgentInput::text("hi"), options).await?;
/// assert_eq!(out.text(), r#"alice ["customer"]"#);
///
/// // The same, piece by piece, with an extra entry tools can read.
/// let options = RunOptions::new(AgentInit::new())
///     .principal("alice")
///     .roles(["customer"])
///     .with_context("tenant", json!("t1"));
/// assert_eq!(options.context["tenant"], "t1");
/// let out = whoami.run_with(AgentInput::text("hi"), options).await?;
/// assert_eq!(out.text(), r#"alice ["customer"]"#);
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
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

    /// The same options with these roles (sets
    /// [`ROLES`](crate::approval::ROLES) in the context; an empty list
    /// removes them): an approver's roles let a resume answer the holds
    /// their approval rules cover (docs/reference.md §10.7).
    pub fn roles<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let roles = Caller::anonymous().with_roles(roles);
        match roles.roles() {
            [] => self.context.remove(crate::approval::ROLES),
            some => self.context.insert(
                crate::approval::ROLES.to_owned(),
                Value::Array(some.iter().cloned().map(Value::String).collect()),
            ),
        };
        self
    }

    /// The same options acting for `caller`: its principal, roles and
    /// actor replace those of the context (an absent one is removed), its
    /// extra entries are added.
    pub fn caller(mut self, caller: impl AsCaller) -> Self {
        for key in [PRINCIPAL, crate::approval::ROLES, ACTOR] {
            self.context.remove(key);
        }
        self.context.extend(caller.into_context());
        self
    }

    /// The same options with an extra request-context entry.
    pub fn with_context(mut self, key: impl Into<String>, value: Value) -> Self {
        self.context.insert(key.into(), value);
        self
    }
}

impl From<AgentInit> for RunOptions {
    fn from(init: AgentInit) -> Self {
        RunOptions::new(init)
    }
}
