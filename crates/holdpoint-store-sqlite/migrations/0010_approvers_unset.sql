-- The waiting rows whose `approvers` is unset (migration 0009), which the
-- store looks for each time it opens (schema.rs, `backfill_approvers`;
-- holdpoint_store_sql::row::approvers_backfill). Every write sets the
-- column, so there are none once they are filled in and this index stays
-- empty. Without it the search walked the index of every waiting row and
-- read each row from the table to test the column: 0.6 - 2.5 s per open
-- at 1M sessions (100,000 waiting; BENCHMARKS.md, "SQLite 1k -> 1M").
CREATE INDEX holdpoint_snapshots_approvers_unset ON holdpoint_snapshots (snapshot_id)
    WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL
      AND approvers IS NULL;
