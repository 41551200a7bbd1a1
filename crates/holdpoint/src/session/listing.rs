//! The reference listing: a [`SnapshotQuery`] applied to rows in memory,
//! whose answers every store's `list_snapshots` must match (the testkit's
//! store suite compares them).

use super::query::SnapshotQuery;
use super::snapshot::Snapshot;

/// Applies a [`SnapshotQuery`] to rows in memory: the reference semantics
/// that every store's `list_snapshots` must match.
pub fn filter_snapshots<'a>(rows: impl IntoIterator<Item = &'a Snapshot>, query: &SnapshotQuery) -> Vec<Snapshot> {
    let rows: Vec<&Snapshot> = rows.into_iter().collect();
    let mut out: Vec<Snapshot> = if query.latest_only() {
        let mut sessions: std::collections::HashMap<&str, Vec<&Snapshot>> = std::collections::HashMap::new();
        for s in &rows {
            sessions.entry(s.session_id.as_str()).or_default().push(s);
        }
        let mut out = Vec::new();
        for mut session in sessions.into_values() {
            session.sort_by(|a, b| (b.created_at, &b.snapshot_id).cmp(&(a.created_at, &a.snapshot_id)));
            out.extend(
                latest_of(&session, !query.waiting_only)
                    .filter(|s| query.matches_row(s))
                    .cloned(),
            );
        }
        out
    } else {
        rows.into_iter().filter(|s| query.matches_row(s)).cloned().collect()
    };
    out.sort_by(|a, b| (b.created_at, &b.snapshot_id).cmp(&(a.created_at, &a.snapshot_id)));
    out.truncate(query.limit());
    out.into_iter().map(Snapshot::as_read).collect()
}

/// The rows of one session (newest first) that count as its latest: the
/// newest, and with `past_unfinished`, also an older row whose every newer
/// row is an unfinished pending row that continued it (see
/// [`Snapshot::is_unfinished_successor_of`]).
fn latest_of<'a>(session: &[&'a Snapshot], past_unfinished: bool) -> impl Iterator<Item = &'a Snapshot> {
    let mut out = Vec::new();
    // The parent every row seen so far continued, while they all are
    // unfinished pending rows.
    let mut newer_continue: Option<&str> = None;
    for (n, s) in session.iter().enumerate() {
        if n == 0 || newer_continue == Some(s.snapshot_id.as_str()) {
            out.push(*s);
        }
        if !past_unfinished {
            break;
        }
        let continues = s
            .parent_id
            .as_deref()
            .filter(|parent| s.is_unfinished_successor_of(parent));
        match (n, continues) {
            (0, Some(parent)) => newer_continue = Some(parent),
            (_, Some(parent)) if newer_continue == Some(parent) => {}
            _ => break,
        }
    }
    out.into_iter()
}
