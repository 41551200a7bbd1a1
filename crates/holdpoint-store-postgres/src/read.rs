//! The reading half of the store: single rows, statuses, listings and the
//! audit trail (a session's latest row: [`crate::latest`]). Every read is
//! one statement, so it sees one committed state.

use std::collections::HashMap;

use holdpoint::Result;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus, WaitingCount};
use sqlx::PgPool;

use crate::dialect::Postgres;
use crate::error::store_error;
use holdpoint_store_sql::row::{self, Listing};

/// Snapshot `id` as a reader sees it now.
pub(crate) async fn snapshot(pool: &PgPool, id: &str) -> Result<Option<Snapshot>> {
    let data: Option<String> = sqlx::query_scalar("SELECT data::text FROM holdpoint_snapshots WHERE snapshot_id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(|e| store_error(&format!("read snapshot {id}"), e))?;
    data.map(|d| row::decode(id, &d).map(Snapshot::as_read)).transpose()
}

/// The statuses of the rows with these ids, as a reader sees them now.
pub(crate) async fn statuses(pool: &PgPool, ids: &[String]) -> Result<HashMap<String, SnapshotStatus>> {
    let rows: Vec<(String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT snapshot_id, status, updated_at_ns, heartbeat_at_ns FROM holdpoint_snapshots \
         WHERE snapshot_id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("read statuses", e))?;
    rows.into_iter()
        .map(|(id, status, updated, heartbeat)| {
            let read = row::read_status(&id, &status, updated, heartbeat)?;
            Ok((id, read))
        })
        .collect()
}

/// Runs a listing statement, binding its filters and its limit. Its text
/// takes at most 24 shapes for snapshots and 8 for the audit trail, well
/// within sqlx's statement cache of each connection (100 by default).
async fn listed<T>(pool: &PgPool, listing: Listing) -> sqlx::Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(listing.sql));
    for arg in listing.args {
        query = query.bind(arg);
    }
    query.bind(listing.limit).fetch_all(pool).await
}

fn list_sql(query: &SnapshotQuery) -> Listing {
    row::snapshot_listing(
        query,
        "SELECT s.snapshot_id, s.data::text FROM holdpoint_snapshots s",
        Postgres,
    )
}

/// `list_snapshots`: the filters of [`SnapshotQuery`], newest first (see
/// [`row::snapshot_listing`]: each filter is answered from its index, even
/// by the generic plan PostgreSQL switches to after a few executions).
pub(crate) async fn list(pool: &PgPool, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows: Vec<(String, String)> = listed(pool, list_sql(query))
        .await
        .map_err(|e| store_error("list snapshots", e))?;
    row::decode_listed(rows, query)
}

/// `count_waiting`: one aggregate over the partial index of waiting rows
/// (see [`row::waiting_count`]).
pub(crate) async fn count_waiting(pool: &PgPool, agent: Option<&str>) -> Result<WaitingCount> {
    let count = row::waiting_count(agent, Postgres);
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(count.sql));
    for arg in count.args {
        query = query.bind(arg);
    }
    let (n, oldest): (i64, Option<i64>) = query
        .fetch_one(pool)
        .await
        .map_err(|e| store_error("count waiting sessions", e))?;
    Ok(row::waiting_counted(n, oldest))
}

fn audit_sql(query: &AuditQuery) -> Listing {
    row::audit_listing(query, "SELECT seq, data::text FROM holdpoint_audit", Postgres)
}

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) async fn audit(pool: &PgPool, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows: Vec<(i64, String)> = listed(pool, audit_sql(query))
        .await
        .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use holdpoint_testkit::TempPostgres;
    use sqlx::{PgConnection, Row};

    use holdpoint_testkit::store_suite::{indexed_audit_listings, indexed_snapshot_listings};

    use super::*;

    /// A few thousand rows, so that the planner's choices are the ones a
    /// real table gets: 1000 sessions of 5 rows, 100 agents, 100 owners
    /// (every other row has none), 1 row in 100 waiting; the audit trail
    /// alike.
    const ROWS: &str = "
        INSERT INTO holdpoint_snapshots (snapshot_id, session_id, created_at_ns, updated_at_ns,
                resumed_at_ns, status, finish_reason, agent, owner, data)
            SELECT 'snap-' || i, 'session-' || (i % 1000), i, i,
                   CASE WHEN i % 200 = 100 THEN i END,
                   CASE WHEN i % 100 = 0 OR i % 200 = 100 THEN 'completed' ELSE 'pending' END,
                   CASE WHEN i % 100 = 0 OR i % 200 = 100 THEN 'interrupted' END,
                   'agent-' || (i % 100),
                   CASE WHEN i % 2 = 0 THEN 'owner-' || (i % 100) END,
                   '{}'
            FROM generate_series(1, 5000) AS i;
        INSERT INTO holdpoint_audit (record_id, at_ns, principal, agent, session_id, snapshot_id, data)
            SELECT 'audit-' || i, i, CASE WHEN i % 2 = 0 THEN 'owner-' || (i % 100) END,
                   'agent-' || (i % 100), 'session-' || (i % 1000), 'snap-' || i, '{}'
            FROM generate_series(1, 5000) AS i;
        ANALYZE holdpoint_snapshots;
        ANALYZE holdpoint_audit;
        SET plan_cache_mode = force_generic_plan;";

    /// The generic plan (the one a prepared statement settles on after a
    /// few executions) of `listing`, as `EXPLAIN` prints it.
    async fn generic_plan(conn: &mut PgConnection, listing: &Listing) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("listing_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let quote = |v: &str| format!("'{}'", v.replace('\'', "''"));
        let mut args: Vec<String> = listing.args.iter().map(|a| quote(a)).collect();
        args.push(listing.limit.to_string());
        let explain = format!(
            "PREPARE {name} AS {}; EXPLAIN EXECUTE {name}({})",
            listing.sql,
            args.join(", ")
        );
        let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(explain))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let lines: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        lines.join("\n")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_filtered_listing_reads_an_index_not_the_whole_table() {
        let Some(pg) = TempPostgres::start_or_skip("every_filtered_listing_reads_an_index_not_the_whole_table") else {
            return;
        };
        let pool = PgPool::connect(pg.url()).await.unwrap();
        crate::schema::migrate(&pool).await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        sqlx::raw_sql(ROWS).execute(&mut *conn).await.unwrap();

        for (query, index) in indexed_snapshot_listings() {
            let plan = generic_plan(&mut conn, &list_sql(&query)).await;
            // On the listed rows `s` (the NOT EXISTS of the waiting listing
            // reads the session index too, on `t`).
            assert!(
                plan.contains(&format!("using {index} on holdpoint_snapshots s")),
                "{query:?} should read {index}:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan on holdpoint_snapshots"),
                "{query:?} scans the table:\n{plan}"
            );
        }
        // The waiting listing comes in the index's order: no sort.
        let waiting = list_sql(&SnapshotQuery {
            waiting_only: true,
            ..Default::default()
        });
        let plan = generic_plan(&mut conn, &waiting).await;
        assert!(!plan.contains("Sort"), "{plan}");
        // The waiting count reads an index too, never the whole table.
        for agent in [None, Some("agent-7")] {
            let mut count = row::waiting_count(agent, Postgres);
            // The plan helper binds a limit as the last parameter.
            count.sql.push_str(&format!(" LIMIT ${}", count.args.len() + 1));
            count.limit = 1;
            let plan = generic_plan(&mut conn, &count).await;
            assert!(
                !plan.contains("Seq Scan on holdpoint_snapshots s"),
                "{agent:?}:\n{plan}"
            );
        }

        for (query, index) in indexed_audit_listings() {
            let plan = generic_plan(&mut conn, &audit_sql(&query)).await;
            assert!(
                plan.contains(&format!("using {index} on holdpoint_audit")),
                "{query:?} should read {index}:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan on holdpoint_audit"),
                "{query:?} scans the table:\n{plan}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approvers_page_starts_no_parallel_workers_and_opening_reads_no_table() {
        let Some(pg) =
            TempPostgres::start_or_skip("an_approvers_page_starts_no_parallel_workers_and_opening_reads_no_table")
        else {
            return;
        };
        let pool = PgPool::connect(pg.url()).await.unwrap();
        crate::schema::migrate(&pool).await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        sqlx::raw_sql(ROWS).execute(&mut *conn).await.unwrap();
        // One agent with many waiting sessions, a role in twenty on each (as
        // the scale bench fills them), and workers made free: the planner
        // takes them wherever it may (it did for this page at 1M sessions,
        // whose 0.5 ms of work then waited 10 - 30 ms for them to start).
        sqlx::raw_sql(
            "INSERT INTO holdpoint_snapshots (snapshot_id, session_id, created_at_ns, updated_at_ns,
                     status, finish_reason, agent, owner, approvers, data)
                 SELECT 'teller-' || i, 'teller-session-' || i, 10000 + i, 10000 + i,
                        'completed', 'interrupted', 'teller', 'owner-' || (i % 100),
                        chr(31) || '\"role-' || (i % 20) || '\"' || chr(31), '{}'
                 FROM generate_series(1, 20000) AS i;
             ANALYZE holdpoint_snapshots;
             SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
             SET min_parallel_index_scan_size = 0; SET min_parallel_table_scan_size = 0;",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        let page = SnapshotQuery {
            agent: Some("teller".into()),
            waiting_only: true,
            limit: Some(50),
            viewer: Some(holdpoint::session::Viewer {
                principal: Some("approver".into()),
                roles: vec!["role-7".into()],
            }),
            ..Default::default()
        };
        let plan = generic_plan(&mut conn, &list_sql(&page)).await;
        assert!(plan.contains("holdpoint_snapshots_waiting_agent"), "{plan}");
        assert!(!plan.contains("Gather") && !plan.contains("Parallel"), "{plan}");
        // The search for unset approvers on opening reads its own (empty)
        // index, never the whole table.
        let backfill = Listing {
            sql: row::approvers_backfill(Postgres),
            args: Vec::new(),
            limit: 1000,
        };
        let plan = generic_plan(&mut conn, &backfill).await;
        assert!(plan.contains("holdpoint_snapshots_approvers_unset"), "{plan}");
    }
}
