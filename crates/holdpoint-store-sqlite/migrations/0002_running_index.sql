-- Lighter writes (issue #9). The status index held every row, so every
-- insert and every status change rewrote one of its pages; no query looks
-- rows up by a settled status. It now holds only running rows (pending,
-- aborting): settled rows, the vast majority, never touch it.
DROP INDEX holdpoint_snapshots_status;

CREATE INDEX holdpoint_snapshots_running
    ON holdpoint_snapshots (status)
    WHERE status IN ('pending', 'aborting');
