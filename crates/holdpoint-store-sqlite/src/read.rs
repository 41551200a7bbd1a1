//! The reading half of the store: single rows, a session's latest row,
//! listings and the audit trail. Every read is one statement, so it sees
//! one committed state. These run on a reader's thread (see
//! [`Readers`](crate::readers::Readers)), or on the writer's inside its
//! transaction.

use holdpoint::Result;
use holdpoint::session::row;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension};

use crate::error::store_error;

/// Row `id`'s stored JSON, or `None` when absent.
pub(crate) fn data(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT data FROM holdpoint_snapshots WHERE snapshot_id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
}

/// Snapshot `id` as a reader sees it now.
pub(crate) fn snapshot(conn: &Connection, id: &str) -> Result<Option<Snapshot>> {
    let data = data(conn, id).map_err(|e| store_error(&format!("read snapshot {id}"), e))?;
    data.map(|d| row::decode(id, &d).map(Snapshot::as_read)).transpose()
}

/// The session's row with the greatest `created_at`, ties by greatest id.
pub(crate) fn latest(conn: &Connection, session_id: &str) -> Result<Option<Snapshot>> {
    let found: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT snapshot_id, data FROM holdpoint_snapshots WHERE session_id = ?1 \
             ORDER BY created_at_ns DESC, snapshot_id DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| store_error(&format!("read latest snapshot of session {session_id}"), e))?;
    found
        .map(|(id, d)| row::decode(&id, &d).map(Snapshot::as_read))
        .transpose()
}

/// The status of row `id` as a reader sees it now, or `None` when absent.
pub(crate) fn status(conn: &Connection, id: &str) -> Result<Option<SnapshotStatus>> {
    let found: Option<(String, i64, Option<i64>)> = conn
        .prepare_cached("SELECT status, updated_at_ns, heartbeat_at_ns FROM holdpoint_snapshots WHERE snapshot_id = ?1")
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(|e| store_error(&format!("read status of snapshot {id}"), e))?;
    found
        .map(|(status, updated, heartbeat)| row::read_status(id, &status, updated, heartbeat))
        .transpose()
}

/// The text and arguments of one listing: only the filters that are set
/// become terms, each a plain comparison, so SQLite can answer from the
/// index that fits (the session's, the agent's, the owner's, or the partial
/// index of waiting rows, whose condition the waiting filter repeats
/// exactly) and stop at the limit instead of scanning the table.
struct Listing {
    sql: String,
    args: Vec<Value>,
}

impl Listing {
    fn new(select: &str) -> Self {
        Listing {
            sql: format!("{select} WHERE 1 = 1"),
            args: Vec::new(),
        }
    }

    /// Adds `AND <column> = ?` for a filter that is set.
    fn equals(&mut self, column: &str, value: Option<&String>) {
        if let Some(value) = value {
            self.args.push(Value::Text(value.clone()));
            self.sql.push_str(&format!(" AND {column} = ?{}", self.args.len()));
        }
    }

    /// Ends with the order, newest first, and the limit.
    fn finish(mut self, order: &str, limit: i64) -> Self {
        self.args.push(Value::Integer(limit));
        self.sql
            .push_str(&format!(" ORDER BY {order} LIMIT ?{}", self.args.len()));
        self
    }

    fn rows<T>(
        &self,
        conn: &Connection,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Vec<T>> {
        let mut stmt = conn.prepare_cached(&self.sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(&self.args), row)?;
        rows.collect()
    }
}

/// `list_snapshots`'s statement for `query`. With `waiting_only` or
/// `in_doubt_only`, a row counts only if no row of its session is newer;
/// for `in_doubt_only` this selects the claimed rows, and the claim's lease
/// (inside the JSON) is checked after decoding.
fn list_sql(query: &SnapshotQuery) -> Listing {
    let mut listing = Listing::new("SELECT s.snapshot_id, s.data FROM holdpoint_snapshots s");
    listing.equals("s.agent", query.agent.as_ref());
    listing.equals("s.session_id", query.session_id.as_ref());
    listing.equals("s.owner", query.owner.as_ref());
    if query.waiting_only || query.in_doubt_only {
        // The partial index `holdpoint_snapshots_waiting` has exactly the
        // waiting condition.
        listing
            .sql
            .push_str(" AND s.status = 'completed' AND s.finish_reason = 'interrupted'");
        listing.sql.push_str(if query.waiting_only {
            " AND s.resumed_at_ns IS NULL"
        } else {
            " AND s.resumed_at_ns IS NOT NULL"
        });
        listing.sql.push_str(
            " AND NOT EXISTS (SELECT 1 FROM holdpoint_snapshots t WHERE t.session_id = s.session_id \
               AND (t.created_at_ns > s.created_at_ns \
                    OR (t.created_at_ns = s.created_at_ns AND t.snapshot_id > s.snapshot_id)))",
        );
    }
    listing.finish("s.created_at_ns DESC, s.snapshot_id DESC", row::list_limit(query))
}

/// `list_snapshots`: the filters of [`SnapshotQuery`], newest first.
pub(crate) fn list(conn: &Connection, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows = list_sql(query)
        .rows(conn, |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| store_error("list snapshots", e))?;
    row::decode_listed(rows, query)
}

/// `list_audit`'s statement for `query`, newest first.
fn audit_sql(query: &AuditQuery) -> Listing {
    let mut listing = Listing::new("SELECT seq, data FROM holdpoint_audit");
    listing.equals("agent", query.agent.as_ref());
    listing.equals("session_id", query.session_id.as_ref());
    listing.equals("principal", query.principal.as_ref());
    listing.finish("seq DESC", row::sql_limit(query.limit()))
}

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) fn audit(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows = audit_sql(query)
        .rows(conn, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How SQLite runs `listing` on the store's schema.
    fn plan(listing: &Listing) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", listing.sql)).unwrap();
        let steps: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(&listing.args), |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        steps.join("; ")
    }

    #[test]
    fn every_filtered_listing_reads_an_index_not_the_whole_table() {
        let some = |v: &str| Some(v.to_owned());
        let cases = [
            (
                SnapshotQuery {
                    session_id: some("s1"),
                    ..Default::default()
                },
                "holdpoint_snapshots_latest",
            ),
            (
                SnapshotQuery {
                    agent: some("teller"),
                    ..Default::default()
                },
                "holdpoint_snapshots_agent",
            ),
            (
                SnapshotQuery {
                    owner: some("alice"),
                    ..Default::default()
                },
                "holdpoint_snapshots_owner",
            ),
            (
                SnapshotQuery {
                    waiting_only: true,
                    ..Default::default()
                },
                "holdpoint_snapshots_waiting",
            ),
        ];
        for (query, index) in cases {
            let plan = plan(&list_sql(&query));
            assert!(plan.contains(index), "{query:?} should use {index}: {plan}");
            // (Scanning the partial index of waiting rows is fine: it holds
            // nothing else.)
            assert!(
                !plan.split("; ").any(|step| step == "SCAN s"),
                "{query:?} scans the table: {plan}"
            );
        }
        // The waiting listing comes in the index's order: no sort.
        let waiting = plan(&list_sql(&SnapshotQuery {
            waiting_only: true,
            ..Default::default()
        }));
        assert!(!waiting.contains("TEMP B-TREE"), "{waiting}");
        for (query, index) in [
            (
                AuditQuery {
                    session_id: Some("s1".into()),
                    ..Default::default()
                },
                "holdpoint_audit_session",
            ),
            (
                AuditQuery {
                    principal: Some("alice".into()),
                    ..Default::default()
                },
                "holdpoint_audit_principal",
            ),
            (
                AuditQuery {
                    agent: Some("teller".into()),
                    ..Default::default()
                },
                "holdpoint_audit_agent",
            ),
        ] {
            let plan = plan(&audit_sql(&query));
            assert!(plan.contains(index), "{query:?} should use {index}: {plan}");
        }
    }
}
