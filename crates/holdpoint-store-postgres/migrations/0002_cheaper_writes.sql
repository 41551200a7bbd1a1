-- Cheaper writes (issue #9). Each change below leaves every query's answer
-- as it was; none rewrites the table.
--
-- 1. Status changes are announced only when an UPDATE changes a row's
--    status. An INSERT announced nothing anyone could be waiting for: a
--    watcher subscribes only to a row it has read, so a row not yet written
--    has no watchers. And a transaction that NOTIFYs takes a cluster-wide
--    lock from its commit until its WAL flush, so every save under a fresh
--    id had to wait for the flush of the one before: PostgreSQL's group
--    commit never got to share a flush among them.
DROP TRIGGER holdpoint_snapshots_notify_status ON holdpoint_snapshots;
CREATE TRIGGER holdpoint_snapshots_notify_status
    AFTER UPDATE OF status ON holdpoint_snapshots
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION holdpoint_notify_status();

-- 2. The index of every row's status served no query; running rows
--    (pending or aborting) keep one, and other rows no longer pay an index
--    entry for it.
DROP INDEX holdpoint_snapshots_status;
CREATE INDEX holdpoint_snapshots_running ON holdpoint_snapshots (status)
    WHERE status IN ('pending', 'aborting');
