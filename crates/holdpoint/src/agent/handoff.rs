//! Rows of nested runs written with the turn they run in
//! (docs/reference.md §16.8): the pipeline's side of the hand-off, which
//! knows rows and claims, not what produced them (foreground sub-agents
//! today, through the [`Nesting`](super::nesting::Nesting) hooks).
//!
//! A foreground child's turn runs inside its parent's call. Its outcome
//! row (its paused snapshot, or the outcome of its resume) is not written
//! on its own: the child hands it to the parent's turn, which writes it in
//! one [`SessionStore::insert_snapshots`] step with its own row. A level
//! then costs its claim, not two more commits.
//!
//! Invariants:
//! - A parent's row that names a child snapshot is never durable without
//!   it: both are in one all-or-none write, child rows first.
//! - A child's row is handed up only under an id fixed before the hand-off
//!   (a fresh id, or its claimed snapshot's successor), and only by a
//!   child whose parent writes to the same store; a resume that took a
//!   lapsed claim over writes its own outcome, as before.
//! - Rows handed up and never written with a parent's row (the parent's
//!   turn was dropped, detached or lost its claim) are still written on
//!   their own, as each level did before; a child's claim is kept renewed
//!   until its row is written. A parent's write refused after its hold was
//!   confirmed (a claim taken over in between) takes its children's rows
//!   with it: those levels are then in doubt, settled like any call in
//!   doubt (docs/reference.md §16.4), never re-run.

use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::detach::AbortOnDrop;
use crate::agent::hold::Hold;
use crate::error::Result;
use crate::session::{SessionStore, Snapshot};

tokio::task_local! {
    /// The collector of the running turn of an agent with sub-agent tools
    /// (`None` when the agent keeps no sessions): where its children's
    /// rows go.
    static TURN_WRITES: Option<Arc<HandedUp>>;
}

/// Rows children handed to the turn of their parent, oldest first, and the
/// renewals of the claims they were written under.
pub(crate) struct HandedUp {
    store: Arc<dyn SessionStore>,
    rows: Mutex<Vec<(String, Snapshot)>>,
    renewals: Mutex<Vec<AbortOnDrop<()>>>,
    /// The child snapshots this turn's resume checked its nested answers
    /// against (read just before its claim): where the children it
    /// restarts start from, without reading them again.
    preloaded: Mutex<Vec<Snapshot>>,
}

impl HandedUp {
    /// A collector for rows of `store`, holding the `preloaded` child
    /// snapshots.
    pub(crate) fn new(store: Arc<dyn SessionStore>, preloaded: Vec<Snapshot>) -> Arc<Self> {
        Arc::new(HandedUp {
            store,
            rows: Mutex::default(),
            renewals: Mutex::default(),
            preloaded: Mutex::new(preloaded),
        })
    }

    /// The preloaded child snapshot `id`, taken (each is resumed once).
    pub(crate) fn preloaded(&self, id: &str) -> Option<Snapshot> {
        let mut all = self.preloaded.lock().unwrap_or_else(PoisonError::into_inner);
        let at = all.iter().position(|s| s.snapshot_id == id)?;
        Some(all.swap_remove(at))
    }

    /// Whether rows of `store` can be written with this collector's.
    pub(crate) fn same_store(&self, store: &Arc<dyn SessionStore>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.store), Arc::as_ptr(store))
    }

    /// Takes over what `child` (a child's own collector) holds: the rows
    /// its children handed up and their renewals, to go up with its row.
    pub(crate) fn adopt(&self, child: &HandedUp) {
        let rows = child.take();
        let renewals = std::mem::take(&mut *child.renewals.lock().unwrap_or_else(PoisonError::into_inner));
        self.rows.lock().unwrap_or_else(PoisonError::into_inner).extend(rows);
        self.renewals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(renewals);
    }

    /// Hands a child's outcome `row` to the parent. `hold`: the child's
    /// claim, renewed until the row is written.
    pub(crate) fn hand_up(&self, row: (String, Snapshot), hold: Option<Box<Hold>>) {
        if let Some(hold) = hold {
            let renewal = tokio::spawn(async move { hold.keep().await });
            self.renewals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(AbortOnDrop(renewal));
        }
        self.rows.lock().unwrap_or_else(PoisonError::into_inner).push(row);
    }

    /// The rows handed up so far, taken. Their renewals go on until the
    /// collector is dropped, i.e. until the parent's write is done.
    pub(crate) fn take(&self) -> Vec<(String, Snapshot)> {
        std::mem::take(&mut *self.rows.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for HandedUp {
    fn drop(&mut self) {
        let rows = std::mem::take(self.rows.get_mut().unwrap_or_else(PoisonError::into_inner));
        if rows.is_empty() {
            return;
        }
        // The parent's turn ended without taking them (dropped mid-call):
        // each child's outcome stands on its own, as if written by itself.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                rows = rows.len(),
                "sub-agent rows dropped without a runtime to write them"
            );
            return;
        };
        let store = Arc::clone(&self.store);
        runtime.spawn(async move { write_alone(store.as_ref(), rows).await });
    }
}

/// Writes rows handed up that no parent row will carry (best effort: a
/// failure is logged; the child's claim then lapses into doubt).
pub(crate) async fn write_alone(store: &dyn SessionStore, rows: Vec<(String, Snapshot)>) {
    if rows.is_empty() {
        return;
    }
    if let Err(e) = store.insert_snapshots(rows).await {
        tracing::error!(error = %e, "could not write a sub-agent's rows");
    }
}

/// The collector of the running turn, if it has one.
pub(crate) fn turn_writes() -> Option<Arc<HandedUp>> {
    TURN_WRITES.try_with(Clone::clone).ok().flatten()
}

/// Runs `turn` with `writes` as the collector its sub-agent calls hand
/// their rows to.
pub(crate) async fn collecting<T>(writes: Option<Arc<HandedUp>>, turn: impl Future<Output = T>) -> T {
    TURN_WRITES.scope(writes, turn).await
}

/// `rows` and then `own`, written as one step; returns `own` as written.
pub(crate) async fn write_with(
    store: &dyn SessionStore,
    mut rows: Vec<(String, Snapshot)>,
    own: (String, Snapshot),
) -> Result<Snapshot> {
    if rows.is_empty() {
        return store.insert_snapshot(&own.0, own.1).await;
    }
    rows.push(own);
    let id = rows.last().map(|(id, _)| id.clone()).unwrap_or_default();
    store
        .insert_snapshots(rows)
        .await?
        .pop()
        .ok_or_else(|| crate::error::Error::Internal(format!("snapshot {id} was not written")))
}
