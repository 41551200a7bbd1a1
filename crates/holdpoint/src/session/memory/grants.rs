//! The in-memory store's standing grants (docs/reference.md §10.9): kept
//! beside the rows under the store's one lock, so a use is a
//! compare-and-set and its audit record is appended in the same step.

use chrono::{DateTime, Utc};

use super::rows::Rows;
use crate::error::{Error, Result};
use crate::hold::{Grant, GrantQuery};
use crate::session::audit::AuditRecord;

impl Rows {
    /// See `GrantStore::insert_grant`.
    pub(super) fn insert_grant(&mut self, grant: Grant) -> Result<()> {
        if self.grants.iter().any(|g| g.id == grant.id) {
            return Err(Error::AlreadyExists(format!("grant {} exists already", grant.id)));
        }
        self.grants.push(grant);
        Ok(())
    }

    /// See `GrantStore::get_grant`.
    pub(super) fn get_grant(&self, id: &str) -> Option<Grant> {
        self.grants.iter().find(|g| g.id == id).cloned()
    }

    /// See `GrantStore::list_grants`: newest first.
    pub(super) fn list_grants(&self, query: &GrantQuery) -> Vec<Grant> {
        self.grants
            .iter()
            .rev()
            .filter(|g| query.matches(g))
            .take(query.limit())
            .cloned()
            .collect()
    }

    /// See `GrantStore::use_grant`.
    pub(super) fn use_grant(&mut self, id: &str, now: DateTime<Utc>, audit: Vec<AuditRecord>) -> Option<Grant> {
        let slot = self.grants.iter_mut().find(|g| g.id == id)?;
        let next = slot.used_once(now)?;
        *slot = next.clone();
        self.audit.extend(audit);
        Some(next)
    }

    /// See `GrantStore::revoke_grant`.
    pub(super) fn revoke_grant(&mut self, id: &str, by: &str, at: DateTime<Utc>) -> Option<Grant> {
        let slot = self.grants.iter_mut().find(|g| g.id == id)?;
        if let Some(next) = slot.revoked(by, at) {
            *slot = next;
        }
        Some(slot.clone())
    }
}
