//! The schema and its migrations (`migrations/NNNN_name.sql`).
//!
//! Migrations are applied on start, each once, in one transaction that
//! first takes an advisory lock, so replicas starting together migrate one
//! after another. A database migrated by a newer build is refused rather
//! than misread.

use holdpoint::{Error, Result};
use sqlx::PgPool;

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
        name: "cheaper_writes",
        sql: include_str!("../migrations/0002_cheaper_writes.sql"),
    },
    Migration {
        version: 3,
        name: "claim_guard",
        sql: include_str!("../migrations/0003_claim_guard.sql"),
    },
    Migration {
        version: 5,
        name: "outbox",
        sql: include_str!("../migrations/0005_outbox.sql"),
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
        name: "snapshot_read_plans",
        sql: include_str!("../migrations/0010_snapshot_read_plans.sql"),
    },
];

/// Advisory-lock key spaces (the first of `pg_advisory_xact_lock`'s two
/// keys): "Hold" in ASCII, and one more for migrations.
pub(crate) const LOCK_SPACE_ROWS: i32 = 0x486f_6c64;
const LOCK_SPACE_MIGRATIONS: i32 = 0x486f_6c65;

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS holdpoint_schema_migrations (
    version    BIGINT      NOT NULL PRIMARY KEY,
    name       TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// Brings the database's schema up to date.
pub(crate) async fn migrate(pool: &PgPool) -> Result<()> {
    let err = |e| store_error("apply migrations", e);
    let mut tx = pool.begin().await.map_err(err)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
        .bind(LOCK_SPACE_MIGRATIONS)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    sqlx::raw_sql(LEDGER).execute(&mut *tx).await.map_err(err)?;
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM holdpoint_schema_migrations")
        .fetch_all(&mut *tx)
        .await
        .map_err(err)?;
    let known = MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some(newest) = applied.iter().copied().max()
        && newest > known
    {
        return Err(Error::FailedPrecondition(format!(
            "postgres store: the database has schema version {newest}, newer than this build knows ({known}); \
             use a newer Holdpoint"
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
        tracing::info!(target: "holdpoint::store::postgres", version = migration.version, name = migration.name, "applying migration");
        sqlx::raw_sql(migration.sql).execute(&mut *tx).await.map_err(err)?;
        sqlx::query("INSERT INTO holdpoint_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(migration.version)
            .bind(migration.name)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
    }
    backfill_approvers(&mut tx).await?;
    tx.commit().await.map_err(err)
}

/// Rows filled per statement by [`backfill_approvers`].
const BACKFILL_BATCH: i64 = 500;

/// Fills in the `approvers` of the waiting rows written before migration
/// 0009 (or by an older build since), in the migration's transaction: one
/// walk of the partial index of waiting rows when there is nothing to do.
async fn backfill_approvers(tx: &mut sqlx::PgConnection) -> Result<()> {
    let err = |e| store_error("fill in the approvers of waiting rows", e);
    let select = holdpoint_store_sql::row::approvers_backfill(crate::dialect::Postgres)
        .replace("s.data FROM", "s.data::text FROM");
    loop {
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(select.as_str()))
            .bind(BACKFILL_BATCH)
            .fetch_all(&mut *tx)
            .await
            .map_err(err)?;
        let mut ids = Vec::with_capacity(rows.len());
        let mut approvers = Vec::with_capacity(rows.len());
        for (id, data) in &rows {
            approvers.push(holdpoint_store_sql::row::approvers_of_stored(id, data)?);
            ids.push(id.as_str());
        }
        sqlx::query(
            "UPDATE holdpoint_snapshots s SET approvers = a.approvers \
             FROM unnest($1::text[], $2::text[]) AS a(id, approvers) WHERE s.snapshot_id = a.id",
        )
        .bind(&ids)
        .bind(&approvers)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
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

    /// The function the group commit claims rows with runs the claim in
    /// place as `claim.rs` writes it, word for word.
    #[test]
    fn the_claim_function_runs_the_claim_rule() {
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let newest = MIGRATIONS
            .iter()
            .rev()
            .find(|m| m.sql.contains("FUNCTION holdpoint_claim"))
            .unwrap();
        let rule = words(crate::claim::IN_PLACE);
        assert!(words(newest.sql).contains(&format!("{rule};")), "{}", newest.sql);
    }
}
