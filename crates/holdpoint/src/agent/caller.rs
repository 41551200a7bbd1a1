//! Who calls an agent, typed: [`Caller`] (principal, roles, the acting
//! individual and any other request context) and [`AsCaller`], what the
//! agent's caller-taking methods accept (docs/reference.md §5, §10.7).

use serde_json::{Map, Value};

use super::{ACTOR, Access, PRINCIPAL, principal_of};
use crate::approval::{ROLES, roles_of};

/// Who calls an agent: the principal the call acts for, its roles (for
/// approval rules), the individual who acts, and whatever else tools and
/// middleware should see. It is the request context in typed form:
/// [`context`](Self::context) writes it with the keys the agent reads
/// ([`PRINCIPAL`], [`ROLES`], [`ACTOR`]) and [`from_context`](Self::from_context)
/// reads one back.
///
/// Runs take it through [`RunOptions::caller`](super::RunOptions::caller);
/// [`Decisions::answer`](super::Decisions::answer),
/// [`Decisions::grants`](super::Decisions::grants),
/// [`Decisions::revoke_grant`](super::Decisions::revoke_grant) and
/// [`Decisions::settle`](super::Decisions::settle) take `&caller` (see
/// [`AsCaller`]); the reads that take an [`Access`]
/// ([`Decisions::pending_for`](super::Decisions::pending_for),
/// [`Agent::snapshot`](super::Agent::snapshot), …) take `&caller` too.
///
/// ```
/// use holdpoint::agent::{ACTOR, Access, Caller, PRINCIPAL};
/// use holdpoint::approval::ROLES;
/// use serde_json::json;
///
/// let fiona = Caller::new("fiona").with_roles(["finance"]).acting_as("Fiona F.");
/// assert_eq!(fiona.principal(), Some("fiona"));
/// assert!(fiona.has_role("finance"));
/// assert_eq!(fiona.actor(), Some("Fiona F."));
///
/// let context = fiona.context();
/// assert_eq!(context[PRINCIPAL], json!("fiona"));
/// assert_eq!(context[ROLES], json!(["finance"]));
/// assert_eq!(context[ACTOR], json!("Fiona F."));
/// assert_eq!(Caller::from_context(&context), fiona);
///
/// let roles = ["finance".to_owned()];
/// assert_eq!(fiona.access(), Access::Caller { principal: Some("fiona"), roles: &roles });
///
/// // Nobody: sees only sessions nobody owns.
/// assert!(Caller::anonymous().context().is_empty());
/// ```
///
/// The actor is who the audit trail records as deciding and whom approval
/// rules check: a quorum counts distinct actors, and a rule with
/// self-approval off refuses an actor who owns the session. Without
/// [`acting_as`](Self::acting_as) the actor is the principal. Name the same
/// person the same way on every answer.
///
/// A `Caller` is what its code says it is: in process nothing checks it
/// (the process could read everything anyway), and a server builds it from
/// what its authentication established (`holdpoint_server::auth::Identity`).
/// Set [`acting_as`](Self::acting_as) only from an authenticated name: an
/// owner acting under another name is not recognised as the owner.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caller {
    principal: Option<String>,
    /// Sorted, without duplicates.
    roles: Vec<String>,
    actor: Option<String>,
    /// The rest of the request context (never the three keys above).
    extra: Map<String, Value>,
}

impl Caller {
    /// A caller acting for `principal`, with no roles.
    pub fn new(principal: impl Into<String>) -> Self {
        Caller {
            principal: Some(principal.into()),
            ..Caller::default()
        }
    }

    /// A caller with no principal: over a server, the anonymous caller,
    /// who sees only sessions nobody owns. (In process, a context with no
    /// principal, roles or actor is the agent's own process; for reads use
    /// [`Access::Full`].)
    pub fn anonymous() -> Self {
        Caller::default()
    }

    /// The caller a request context describes: its [`PRINCIPAL`],
    /// [`ROLES`] and [`ACTOR`] (string values; others are ignored, as the
    /// agent ignores them), and every other entry as extra context.
    pub fn from_context(context: &Map<String, Value>) -> Self {
        let mut extra = context.clone();
        for key in [PRINCIPAL, ROLES, ACTOR] {
            extra.remove(key);
        }
        Caller {
            principal: principal_of(context).map(str::to_owned),
            roles: normalised(roles_of(context)),
            actor: context.get(ACTOR).and_then(Value::as_str).map(str::to_owned),
            extra,
        }
    }

    /// The same caller with these roles (replacing its roles; an empty
    /// list removes them).
    pub fn with_roles<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.roles = normalised(roles.into_iter().map(Into::into).collect());
        self
    }

    /// The same caller, acted for by the individual `actor` (a person's
    /// name, say, when the principal is a service or a shared account):
    /// recorded as the actor in the audit trail and checked by approval
    /// rules in place of the principal (see the type's docs).
    pub fn acting_as(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// The same caller with an extra request-context entry for tools and
    /// middleware. [`PRINCIPAL`] and [`ROLES`] are ignored here (they come
    /// only from [`new`](Self::new) and [`with_roles`](Self::with_roles));
    /// a string under [`ACTOR`] is [`acting_as`](Self::acting_as).
    pub fn with_context(mut self, key: impl Into<String>, value: Value) -> Self {
        let key = key.into();
        match key.as_str() {
            PRINCIPAL | ROLES => {}
            ACTOR => {
                if let Value::String(actor) = value {
                    self.actor = Some(actor);
                }
            }
            _ => {
                self.extra.insert(key, value);
            }
        }
        self
    }

    /// The principal it acts for (`None`: anonymous).
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Its roles, sorted.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// Whether it has `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// The individual who acts, as the audit trail records them: the
    /// [`acting_as`](Self::acting_as) name, else the principal.
    pub fn actor(&self) -> Option<&str> {
        self.actor.as_deref().or(self.principal.as_deref())
    }

    /// The extra request context (everything but the principal, roles and
    /// actor).
    pub fn extra_context(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// The request context the agent, its tools and middleware see: the
    /// extra entries, the principal under [`PRINCIPAL`], the roles (when
    /// any) under [`ROLES`], the [`acting_as`](Self::acting_as) name (when
    /// set) under [`ACTOR`].
    pub fn context(&self) -> Map<String, Value> {
        let mut context = self.extra.clone();
        if let Some(p) = &self.principal {
            context.insert(PRINCIPAL.to_owned(), Value::String(p.clone()));
        }
        if !self.roles.is_empty() {
            context.insert(
                ROLES.to_owned(),
                Value::Array(self.roles.iter().cloned().map(Value::String).collect()),
            );
        }
        if let Some(a) = &self.actor {
            context.insert(ACTOR.to_owned(), Value::String(a.clone()));
        }
        context
    }

    /// What it may read: its own sessions, and the held snapshots its roles
    /// may answer ([`Access::Caller`]).
    pub fn access(&self) -> Access<'_> {
        Access::Caller {
            principal: self.principal(),
            roles: &self.roles,
        }
    }
}

fn normalised(mut roles: Vec<String>) -> Vec<String> {
    roles.sort();
    roles.dedup();
    roles
}

impl<'a> From<&'a Caller> for Access<'a> {
    fn from(caller: &'a Caller) -> Self {
        caller.access()
    }
}

impl From<Caller> for Map<String, Value> {
    fn from(caller: Caller) -> Self {
        caller.context()
    }
}

impl From<&Map<String, Value>> for Caller {
    fn from(context: &Map<String, Value>) -> Self {
        Caller::from_context(context)
    }
}

/// What the agent methods that act for someone accept as that someone: a
/// [`Caller`] (by value or `&`), or a request context as a map (by value
/// or `&`, as they took it before [`Caller`] existed).
///
/// ```
/// use holdpoint::agent::{AsCaller, Caller, PRINCIPAL};
/// use serde_json::{Map, json};
///
/// let mut map = Map::new();
/// map.insert(PRINCIPAL.into(), json!("alice"));
/// assert_eq!((&map).into_context(), Caller::new("alice").into_context());
/// ```
pub trait AsCaller {
    /// The request context it describes.
    fn into_context(self) -> Map<String, Value>;
}

impl AsCaller for Caller {
    fn into_context(self) -> Map<String, Value> {
        self.context()
    }
}

impl AsCaller for &Caller {
    fn into_context(self) -> Map<String, Value> {
        self.context()
    }
}

impl AsCaller for Map<String, Value> {
    fn into_context(self) -> Map<String, Value> {
        self
    }
}

impl AsCaller for &Map<String, Value> {
    fn into_context(self) -> Map<String, Value> {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_context_reads_back_as_the_caller_it_came_from() {
        let olga = Caller::new("olga")
            .with_roles(["support", "finance", "finance"])
            .acting_as("Olga P.")
            .with_context("tenant", json!("t1"));
        assert_eq!(olga.roles(), ["finance", "support"]);
        let context = olga.context();
        assert_eq!(
            Value::Object(context.clone()),
            json!({"tenant": "t1", "principal": "olga", "roles": ["finance", "support"], "actor": "Olga P."})
        );
        assert_eq!(Caller::from_context(&context), olga);
        assert_eq!(Caller::from(&context).into_context(), context);
    }

    #[test]
    fn the_typed_keys_cannot_be_smuggled_in_as_extra_context() {
        let eve = Caller::anonymous()
            .with_context(PRINCIPAL, json!("mallory"))
            .with_context(ROLES, json!(["operator"]));
        assert!(eve.context().is_empty());
        assert_eq!(
            eve.access(),
            Access::Caller {
                principal: None,
                roles: &[]
            }
        );
        let named = Caller::new("svc").with_context(ACTOR, json!("Ann"));
        assert_eq!(named.actor(), Some("Ann"));
        assert_eq!(Caller::new("svc").actor(), Some("svc"));
        assert_eq!(Caller::new("svc").with_roles(Vec::<String>::new()).context().len(), 1);
    }
}
