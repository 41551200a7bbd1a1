//! The reading half of the store: single rows, statuses, listings and the
//! audit trail (a session's latest row: [`crate::latest`]). Every read is
//! one statement, so it sees one committed state.

use std::collections::HashMap;

use holdpoint::Result;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus};
use sqlx::PgPool;

use crate::error::store_error;
use holdpoint::session::row;

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

/// The text and arguments of one listing: only the filters that are set
/// become terms, each a plain `column = $N`, so even a generic plan (which
/// PostgreSQL switches to after a few executions of a prepared statement)
/// can answer from the index that fits (the session's, the agent's, the
/// owner's, or the partial index of waiting rows, whose condition the
/// waiting filter repeats exactly) instead of scanning and sorting the
/// whole table, as `($1::text IS NULL OR column = $1)` forced it to.
/// There are at most 24 listing texts (8 filter sets, each plain, waiting
/// or in doubt) and 8 audit texts, well within sqlx's statement cache of
/// each connection (100 by default).
struct Listing {
    sql: String,
    /// The text arguments, `$1`, `$2`, … in order; the limit comes last.
    args: Vec<String>,
    limit: i64,
}

impl Listing {
    fn new(select: &str) -> Self {
        Listing {
            sql: format!("{select} WHERE TRUE"),
            args: Vec::new(),
            limit: 0,
        }
    }

    /// Adds `AND <column> = $N` for a filter that is set.
    fn equals(&mut self, column: &str, value: Option<&String>) {
        if let Some(value) = value {
            self.args.push(value.clone());
            self.sql.push_str(&format!(" AND {column} = ${}", self.args.len()));
        }
    }

    /// Ends with the order, newest first, and the limit.
    fn finish(mut self, order: &str, limit: i64) -> Self {
        self.limit = limit;
        self.sql
            .push_str(&format!(" ORDER BY {order} LIMIT ${}", self.args.len() + 1));
        self
    }

    async fn rows<T>(self, pool: &PgPool) -> sqlx::Result<Vec<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(self.sql));
        for arg in self.args {
            query = query.bind(arg);
        }
        query.bind(self.limit).fetch_all(pool).await
    }
}

/// `list_snapshots`'s statement for `query`. With `waiting_only` or
/// `in_doubt_only` (`waiting_only` wins), a row counts only if no row of
/// its session is newer; for `in_doubt_only` this selects the claimed rows,
/// and the claim's lease (inside the JSON) is checked after decoding.
fn list_sql(query: &SnapshotQuery) -> Listing {
    let mut listing = Listing::new("SELECT s.snapshot_id, s.data::text FROM holdpoint_snapshots s");
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
pub(crate) async fn list(pool: &PgPool, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows: Vec<(String, String)> = list_sql(query)
        .rows(pool)
        .await
        .map_err(|e| store_error("list snapshots", e))?;
    row::decode_listed(rows, query)
}

/// `list_audit`'s statement for `query`, newest first.
fn audit_sql(query: &AuditQuery) -> Listing {
    let mut listing = Listing::new("SELECT seq, data::text FROM holdpoint_audit");
    listing.equals("agent", query.agent.as_ref());
    listing.equals("session_id", query.session_id.as_ref());
    listing.equals("principal", query.principal.as_ref());
    listing.finish("seq DESC", row::sql_limit(query.limit()))
}

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) async fn audit(pool: &PgPool, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows: Vec<(i64, String)> = audit_sql(query)
        .rows(pool)
        .await
        .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use holdpoint_testkit::TempPostgres;
    use sqlx::{PgConnection, Row};

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

        let some = |v: &str| Some(v.to_owned());
        let cases = [
            (
                SnapshotQuery {
                    session_id: some("session-7"),
                    ..Default::default()
                },
                "holdpoint_snapshots_latest",
            ),
            (
                SnapshotQuery {
                    agent: some("agent-7"),
                    ..Default::default()
                },
                "holdpoint_snapshots_agent",
            ),
            (
                SnapshotQuery {
                    owner: some("owner-8"),
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

        for (query, index) in [
            (
                AuditQuery {
                    session_id: some("session-7"),
                    ..Default::default()
                },
                "holdpoint_audit_session",
            ),
            (
                AuditQuery {
                    principal: some("owner-8"),
                    ..Default::default()
                },
                "holdpoint_audit_principal",
            ),
            (
                AuditQuery {
                    agent: some("agent-7"),
                    ..Default::default()
                },
                "holdpoint_audit_agent",
            ),
        ] {
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
}
