-- Cheaper writes (issue #9). Each change below leaves every query's answer
-- as it was; none rewrites a table (the new indexes are built in the
-- migration's transaction, which blocks writes while it runs: a scan of
-- each table).
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

-- 3. Listings by owner or principal ask for one owner (principal), never
--    for rows without one, so rows without one (anonymous callers) no
--    longer pay an entry in those indexes: `owner = $x` implies
--    `owner IS NOT NULL`, so the planner still uses them.
DROP INDEX holdpoint_snapshots_owner;
CREATE INDEX holdpoint_snapshots_owner ON holdpoint_snapshots (owner, created_at_ns DESC)
    WHERE owner IS NOT NULL;
DROP INDEX holdpoint_audit_principal;
CREATE INDEX holdpoint_audit_principal ON holdpoint_audit (principal, seq DESC)
    WHERE principal IS NOT NULL;

-- 4. The claims of a group-commit batch (src/group.rs): each row claimed
--    alone, by primary key, only while unclaimed, with "resumedAt" and
--    "resumeLeaseUntil" (`p_members[i]`, JSON members without braces)
--    appended to its document; returns the (0-based) positions of the
--    claims that took. One UPDATE per claim keeps each an index lookup
--    whatever the table's statistics say (a join of the claims with the
--    table was planned as a sequential scan while the table looked small),
--    and a second claim of a row in one batch sees the first one's claim.
CREATE FUNCTION holdpoint_claim(p_ids TEXT[], p_at_ns BIGINT[], p_members TEXT[])
RETURNS SETOF INTEGER
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        UPDATE holdpoint_snapshots
           SET resumed_at_ns = p_at_ns[i],
               data = (left(data::text, -1) || ',' || p_members[i] || '}')::json
         WHERE snapshot_id = p_ids[i] AND resumed_at_ns IS NULL;
        IF FOUND THEN
            RETURN NEXT i - 1;
        END IF;
    END LOOP;
END
$$;
