-- Two plans the snapshots table got wrong at 1M sessions (BENCHMARKS.md,
-- "The approver's first page at 1M: parallel workers").
--
-- 1. No parallel workers for its reads. Every listing reads an index in
-- order and stops at its LIMIT, which is a statement parameter: once a
-- connection's prepared listing switches to its generic plan (after five
-- executions; at once when the inbox's LIMIT 100000 reads and the first
-- page's LIMIT 50 share the statement), the planner guesses the LIMIT and
-- the rows, and took a Gather Merge over two workers for an approver's
-- first page: 0.5 ms of work, then 10 - 30 ms waiting for the workers to
-- start on a busy machine. Only whole-table reads (a count of every
-- agent's waiting sessions) lose their workers; they take seconds at 1M
-- either way.
ALTER TABLE holdpoint_snapshots SET (parallel_workers = 0);
-- 2. The waiting rows whose `approvers` is unset (migration 0009), which the
-- store looks for each time it opens (holdpoint_store_sql::row::approvers_backfill):
-- none once filled, as every write sets the column, so this index stays
-- empty; without it the search read the whole table (1.8 s at 1M).
CREATE INDEX holdpoint_snapshots_approvers_unset ON holdpoint_snapshots (snapshot_id)
    WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL
      AND approvers IS NULL;
