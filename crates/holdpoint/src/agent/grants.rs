//! An agent's standing grants as people list and revoke them
//! (docs/reference.md §10.9): whoever may answer the holds a grant stands
//! in for may see and revoke it; nobody else learns it exists.

use serde_json::{Map, Value};

use super::worker::actor_of;
use super::{AsCaller, Decisions, principal_of};
use crate::approval::{Grant, GrantQuery, roles_of};
use crate::error::{Error, Result};

/// Whether the caller `context` describes may manage `grant`: the agent's
/// own process (no principal, no roles) may manage every grant.
fn manages(context: &Map<String, Value>, roles: &[String], grant: &Grant) -> bool {
    let principal = principal_of(context);
    (principal.is_none() && roles.is_empty()) || grant.manageable_by(principal, roles)
}

impl Decisions<'_> {
    /// This agent's grants that `query` selects and `caller` (a
    /// [`Caller`](super::Caller) or a request context, see [`AsCaller`])
    /// may manage, newest first (read from the store: a revoke anywhere is
    /// seen at once).
    pub async fn grants(self, query: GrantQuery, caller: impl AsCaller) -> Result<Vec<Grant>> {
        let context = &caller.into_context();
        let roles = roles_of(context);
        let limit = query.limit();
        let query = GrantQuery {
            agent: Some(self.agent().name().to_owned()),
            // What the caller may not manage is filtered out after reading:
            // read past it (bounded) so a page is not cut short.
            limit: Some(limit.saturating_mul(10).max(1000)),
            ..query
        };
        let mut found: Vec<Grant> = self
            .agent()
            .require_grants()?
            .list_grants(&query)
            .await?
            .into_iter()
            .filter(|g| manages(context, &roles, g))
            .collect();
        found.truncate(limit);
        Ok(found)
    }

    /// Revokes grant `id` on behalf of `caller` (a
    /// [`Caller`](super::Caller) or a request context, see [`AsCaller`];
    /// its actor is recorded as `revokedBy`); it stops matching at once.
    /// `NOT_FOUND` for a grant of another agent, or one the caller may not
    /// manage. A grant revoked before is returned as it was.
    pub async fn revoke_grant(self, id: &str, caller: impl AsCaller) -> Result<Grant> {
        let context = &caller.into_context();
        let store = self.agent().require_grants()?;
        let roles = roles_of(context);
        let missing = || Error::NotFound(format!("grant {id} not found"));
        let grant = store.get_grant(id).await?.ok_or_else(missing)?;
        if grant.agent != self.agent().name() || !manages(context, &roles, &grant) {
            return Err(missing());
        }
        let by = actor_of(context).unwrap_or("operator");
        store
            .revoke_grant(id, by, chrono::Utc::now())
            .await?
            .ok_or_else(missing)
    }
}
