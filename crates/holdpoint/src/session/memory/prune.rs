//! The in-memory store's prune step (docs/reference.md §11.4): one pass
//! over the session index under the store's lock, so a step sees and
//! deletes a consistent set of rows.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Rows, Stored};
use crate::error::Result;
use crate::session::prune::{PruneOutcome, PruneRequest, prunable_snapshot};

impl Rows {
    /// Examines up to `request.batch` sessions after `request.after` (in
    /// session-id order) and deletes those [`prunable_snapshot`] keeps out.
    pub(super) fn prune(&mut self, request: &PruneRequest) -> Result<PruneOutcome> {
        request.check()?;
        let mut sessions: Vec<&Arc<str>> = self
            .by_session
            .keys()
            .filter(|s| request.after.as_deref().is_none_or(|after| &***s > after))
            .collect();
        let more = sessions.len() > request.batch;
        if more {
            // The `batch` smallest ids, without sorting the whole index.
            sessions.select_nth_unstable(request.batch - 1);
            sessions.truncate(request.batch);
        }
        sessions.sort_unstable();
        let mut outcome = PruneOutcome {
            examined: sessions.len() as u64,
            next: if more {
                sessions.last().map(|s| s.to_string())
            } else {
                None
            },
            ..PruneOutcome::default()
        };
        let mut doomed: Vec<String> = Vec::new();
        for session in sessions {
            let Some(ids) = self.by_session.get(session) else {
                continue;
            };
            let latest = ids
                .iter()
                .filter_map(|id| self.rows.get(id).map(|row| (row.created_at(), id, row)))
                .max_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            let prunable = match latest {
                Some((_, _, Stored::Live(row))) => prunable_snapshot(row, request.older_than),
                // Packed: decoded to be judged (a waiting row never is
                // prunable, a finished one may be).
                Some((_, id, packed)) => prunable_snapshot(&packed.to_snapshot(id)?, request.older_than),
                None => false,
            };
            if prunable {
                outcome.snapshots += ids.len() as u64;
                doomed.push(session.to_string());
            }
        }
        outcome.sessions = doomed.len() as u64;
        let doomed: HashSet<String> = doomed.into_iter().collect();
        if request.audit {
            let picks = |r: &crate::session::audit::AuditRecord| doomed.contains(&r.session_id);
            outcome.audit_records = if request.dry_run {
                self.audit.count(picks)
            } else {
                self.audit.remove(picks)
            } as u64;
        }
        if request.dry_run {
            return Ok(outcome);
        }
        let mut removed: HashSet<std::sync::Arc<str>> = HashSet::new();
        for session in &doomed {
            for id in self.by_session.remove(session.as_str()).unwrap_or_default() {
                self.rows.remove(&id);
                // Dropping the sender ends the row's watch streams.
                self.watchers.remove(&*id);
                removed.insert(id);
            }
        }
        self.hot.retain(|id| !removed.contains(id));
        Ok(outcome)
    }
}
