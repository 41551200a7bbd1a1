//! Which outbox rows a store writes: every row when a channel consumes
//! events, else only the timers whose firing acts on the hold.

use super::{HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT};

/// Which outbox rows a store writes, fixed by the configuration the store
/// is built with (docs/reference.md §11.3).
///
/// A row is written or not when the change it reports is written, by the
/// process that writes it: a channel configured later (a restart with
/// `[notify]`) gets every event of a change made from then on — the
/// decision of a hold created before is such a change and is told — and
/// nothing of the changes made before (that hold's `hold.created` and
/// reminder were never written). Timers that act are written either way,
/// so they fire whenever a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutboxWrites {
    /// Every event and timer: some channel consumes events (the default,
    /// so a store built without knowing writes what any channel needs).
    #[default]
    All,
    /// Only the timers whose firing does something besides telling:
    /// [`HOLD_EXPIRED`] (an expiry may deny the call),
    /// [`HOLD_ESCALATED`] (adds answering roles) and [`HOLD_IN_DOUBT`]
    /// (checks a lapsed resume). `hold.created`, `hold.reminded`,
    /// `hold.decided` and `hold.partially_approved` only tell a channel,
    /// and no channel is configured.
    Timers,
}

impl OutboxWrites {
    /// Whether a row of `kind` is written.
    pub fn writes(self, kind: &str) -> bool {
        match self {
            OutboxWrites::All => true,
            OutboxWrites::Timers => matches!(kind, HOLD_EXPIRED | HOLD_ESCALATED | HOLD_IN_DOUBT),
        }
    }

    /// Whether any `hold.decided` row is written (a claim with
    /// [`OutboxWrites::Timers`] writes only its in-doubt timer).
    pub fn tells(self) -> bool {
        self == OutboxWrites::All
    }
}
