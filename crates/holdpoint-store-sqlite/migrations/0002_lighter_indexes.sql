-- Lighter writes (issue #9): indexes hold only the rows some query looks
-- up by them, so the other rows' writes no longer touch their pages. Each
-- change leaves every query's answer as it was.
--
-- 1. The status index held every row, so every insert and every status
--    change rewrote one of its pages; no query looks rows up by a settled
--    status. It now holds only running rows (pending, aborting).
DROP INDEX holdpoint_snapshots_status;
CREATE INDEX holdpoint_snapshots_running
    ON holdpoint_snapshots (status)
    WHERE status IN ('pending', 'aborting');

-- 2. Listings by owner (principal) ask for one owner, never for rows
--    without one, so rows of anonymous callers no longer pay an entry:
--    `owner = ?` implies `owner IS NOT NULL`, and SQLite still reads these
--    partial indexes for it.
DROP INDEX holdpoint_snapshots_owner;
CREATE INDEX holdpoint_snapshots_owner
    ON holdpoint_snapshots (owner, created_at_ns DESC)
    WHERE owner IS NOT NULL;
DROP INDEX holdpoint_audit_principal;
CREATE INDEX holdpoint_audit_principal
    ON holdpoint_audit (principal, seq DESC)
    WHERE principal IS NOT NULL;
