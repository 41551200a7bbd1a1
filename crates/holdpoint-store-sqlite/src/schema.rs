//! The schema and its migrations (`migrations/NNNN_name.sql`).
//!
//! Migrations are applied on open, each once, in one `BEGIN IMMEDIATE`
//! transaction, so two processes opening a new file at the same moment do
//! not both create it. A database migrated by a newer build is refused
//! rather than misread.

use chrono::Utc;
use holdpoint::{Error, Result};
use rusqlite::{Connection, TransactionBehavior};

use crate::error::store_error;

/// One migration file, embedded at build time.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order. Add new files here; never edit an applied one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "lighter_indexes",
        sql: include_str!("../migrations/0002_lighter_indexes.sql"),
    },
    Migration {
        version: 4,
        name: "outbox",
        sql: include_str!("../migrations/0004_outbox.sql"),
    },
    Migration {
        version: 6,
        name: "grants",
        sql: include_str!("../migrations/0006_grants.sql"),
    },
    Migration {
        version: 7,
        name: "notify_endpoints",
        sql: include_str!("../migrations/0007_notify_endpoints.sql"),
    },
    Migration {
        version: 8,
        name: "waiting_by_agent",
        sql: include_str!("../migrations/0008_waiting_by_agent.sql"),
    },
    Migration {
        version: 9,
        name: "waiting_approvers",
        sql: include_str!("../migrations/0009_waiting_approvers.sql"),
    },
    Migration {
        version: 10,
        name: "approvers_unset",
        sql: include_str!("../migrations/0010_approvers_unset.sql"),
    },
];

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS holdpoint_schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
)";

/// Brings the database's schema up to date (on the writer's connection,
/// before the store takes any work).
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let err = |e| store_error("apply migrations", e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    tx.execute_batch(LEDGER).map_err(err)?;
    let applied: Vec<i64> = tx
        .prepare("SELECT version FROM holdpoint_schema_migrations")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(err)?;
    let known = MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(newest) = applied.iter().copied().max()
        && newest > known
    {
        return Err(Error::FailedPrecondition(format!(
            "sqlite store: the database has schema version {newest}, newer than this build knows ({known}); \
             use a newer Holdpoint"
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
        tracing::info!(target: "holdpoint::store::sqlite", version = migration.version, name = migration.name, "applying migration");
        tx.execute_batch(migration.sql).map_err(err)?;
        tx.execute(
            "INSERT INTO holdpoint_schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![migration.version, migration.name, Utc::now().to_rfc3339()],
        )
        .map_err(err)?;
    }
    backfill_approvers(&tx)?;
    tx.commit().map_err(err)
}

/// Rows filled per statement by [`backfill_approvers`].
const BACKFILL_BATCH: i64 = 500;

/// Fills in the `approvers` of the waiting rows written before migration
/// 0009 (or by an older build since), in the migration's transaction: one
/// walk of the partial index of waiting rows when there is nothing to do.
fn backfill_approvers(tx: &Connection) -> Result<()> {
    let err = |e| store_error("fill in the approvers of waiting rows", e);
    let select = holdpoint_store_sql::row::approvers_backfill(crate::dialect::Sqlite);
    loop {
        let rows: Vec<(String, String)> = tx
            .prepare(&select)
            .and_then(|mut s| s.query_map([BACKFILL_BATCH], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(err)?;
        for (id, data) in &rows {
            let approvers = holdpoint_store_sql::row::approvers_of_stored(id, data)?;
            tx.execute(
                "UPDATE holdpoint_snapshots SET approvers = ?2 WHERE snapshot_id = ?1",
                rusqlite::params![id, approvers],
            )
            .map_err(err)?;
        }
        if (rows.len() as i64) < BACKFILL_BATCH {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_file_is_listed_once_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<String> = MIGRATIONS
            .iter()
            .map(|m| format!("{:04}_{}.sql", m.version, m.name))
            .collect();
        assert_eq!(files, listed);
    }

    /// The search [`backfill_approvers`] runs on every open reads an index
    /// that holds only the rows it looks for (none once filled in), not
    /// every waiting row and its table row.
    #[test]
    fn the_approvers_backfill_reads_only_unset_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let select = holdpoint_store_sql::row::approvers_backfill(crate::dialect::Sqlite);
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {select}"))
            .unwrap()
            .query_map([BACKFILL_BATCH], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(plan, ["SCAN s USING INDEX holdpoint_snapshots_approvers_unset"]);
    }
}
