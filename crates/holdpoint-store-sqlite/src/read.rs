//! The reading half of the store: single rows, a session's latest row,
//! listings and the audit trail. Every read is one statement, so it sees
//! one committed state. These run on a reader's thread (see
//! [`Readers`](crate::readers::Readers)), or on the writer's inside its
//! transaction.

use holdpoint::Result;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus, WaitingCount};
use holdpoint_store_sql::row;
use holdpoint_store_sql::row::Listing;
use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension};

use crate::dialect::Sqlite;
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

/// Runs a listing statement, binding its filters and its limit.
fn listed<T>(
    conn: &Connection,
    listing: &Listing,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(&listing.sql)?;
    let mut args: Vec<&dyn ToSql> = listing.args.iter().map(|a| a as &dyn ToSql).collect();
    args.push(&listing.limit);
    let rows = stmt.query_map(args.as_slice(), row)?;
    rows.collect()
}

fn list_sql(query: &SnapshotQuery) -> Listing {
    row::snapshot_listing(
        query,
        "SELECT s.snapshot_id, s.data, s.approvers FROM holdpoint_snapshots s",
        Sqlite,
    )
}

/// `list_snapshots`: the filters of [`SnapshotQuery`], newest first (see
/// [`row::snapshot_listing`]: each filter is answered from its index). A
/// viewer is checked on each row from its `approvers` column where that
/// is recorded ([`row::decode_viewed`]).
pub(crate) fn list(conn: &Connection, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows = listed(conn, &list_sql(query), |r| {
        Ok(row::Listed {
            snapshot_id: r.get(0)?,
            data: r.get(1)?,
            approvers: r.get(2)?,
        })
    })
    .map_err(|e| store_error("list snapshots", e))?;
    row::decode_viewed(rows, query)
}

/// `count_waiting`: one aggregate over the partial index of waiting rows
/// (see [`row::waiting_count`]).
pub(crate) fn count_waiting(conn: &Connection, agent: Option<&str>) -> Result<WaitingCount> {
    let count = row::waiting_count(agent, Sqlite);
    let args: Vec<&dyn ToSql> = count.args.iter().map(|a| a as &dyn ToSql).collect();
    let (n, oldest): (i64, Option<i64>) = conn
        .prepare_cached(&count.sql)
        .and_then(|mut s| s.query_row(args.as_slice(), |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(|e| store_error("count waiting sessions", e))?;
    Ok(row::waiting_counted(n, oldest))
}

fn audit_sql(query: &AuditQuery) -> Listing {
    row::audit_listing(query, "SELECT seq, data FROM holdpoint_audit", Sqlite)
}

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) fn audit(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows = listed(conn, &audit_sql(query), |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })
    .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}

#[cfg(test)]
mod tests {
    use holdpoint_testkit::store_suite::{indexed_audit_listings, indexed_snapshot_listings};

    use super::*;

    /// How SQLite runs `listing` on the store's schema.
    fn plan(listing: &Listing) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::conn::plan_without_arguments(&conn).unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", listing.sql)).unwrap();
        let mut args: Vec<&dyn ToSql> = listing.args.iter().map(|a| a as &dyn ToSql).collect();
        args.push(&listing.limit);
        let steps: Vec<String> = stmt
            .query_map(args.as_slice(), |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        steps.join("; ")
    }

    #[test]
    fn every_filtered_listing_reads_an_index_not_the_whole_table() {
        for (query, index) in indexed_snapshot_listings() {
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
        // The waiting count reads an index too, never the whole table.
        for agent in [None, Some("agent-7")] {
            let mut count = row::waiting_count(agent, Sqlite);
            // The plan helper binds a limit as the last parameter.
            count.sql.push_str(&format!(" LIMIT ?{}", count.args.len() + 1));
            count.limit = 1;
            let plan = plan(&count);
            assert!(plan.contains("holdpoint_snapshots_"), "{agent:?}: {plan}");
            assert!(!plan.split("; ").any(|step| step == "SCAN s"), "{agent:?}: {plan}");
        }
        for (query, index) in indexed_audit_listings() {
            let plan = plan(&audit_sql(&query));
            assert!(plan.contains(index), "{query:?} should use {index}: {plan}");
        }
    }

    /// An approver's listing, run again for another role and another
    /// principal, reuses its prepared statement: SQLite neither parses nor
    /// plans it again (it did while it planned from the bound values).
    #[test]
    fn a_listing_is_not_prepared_again_for_other_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::options::SqliteStoreOptions::new(dir.path().join("p.db"));
        let mut conn = crate::conn::open(&options).unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let query = |principal: &str, role: &str| SnapshotQuery {
            agent: Some("teller".into()),
            waiting_only: true,
            limit: Some(50),
            viewer: Some(holdpoint::session::Viewer {
                principal: Some(principal.into()),
                roles: vec![role.into()],
            }),
            ..SnapshotQuery::default()
        };
        let runs = [("olga", "finance"), ("olga", "legal"), ("ivan", "audit")];
        for (principal, role) in runs {
            assert!(list(&conn, &query(principal, role)).unwrap().is_empty());
        }
        let reprepared = |sql: &str| {
            let stmt = conn.prepare_cached(sql).unwrap();
            stmt.get_status(rusqlite::StatementStatus::RePrepare)
        };
        assert_eq!(reprepared(&list_sql(&query("olga", "finance")).sql), 0);
        for (principal, role) in runs {
            let audit = AuditQuery {
                session_id: Some(format!("{principal}-{role}")),
                ..AuditQuery::default()
            };
            assert!(super::audit(&conn, &audit).unwrap().is_empty());
        }
        let audit = audit_sql(&AuditQuery {
            session_id: Some("x".into()),
            ..AuditQuery::default()
        });
        assert_eq!(reprepared(&audit.sql), 0);
    }
}
