-- An approver's pending listing (`Agent::pending_for` with roles, the
-- inbox): the waiting rows of one agent that the caller may see, newest
-- first. Before, the roles that may answer a row lived only inside its
-- document, so the listing read every waiting row of the agent and
-- filtered in process (1.2 - 1.5 s at 1M sessions on PostgreSQL).
-- `approvers` holds the roles of the rules the row's paused calls are held
-- under (holdpoint_store_sql::row::approvers_column), filled with every
-- write; NULL for rows written before this migration until the store
-- fills them in on opening (waiting rows only: no other row is listed).
ALTER TABLE holdpoint_snapshots ADD COLUMN approvers TEXT;
-- The waiting rows' index of 0008, rebuilt so that it includes the columns an approver's
-- listing filters on:
-- the rows the caller may not see are skipped in the index.
DROP INDEX holdpoint_snapshots_waiting_agent;
CREATE INDEX holdpoint_snapshots_waiting_agent
    ON holdpoint_snapshots (agent, created_at_ns DESC, snapshot_id DESC)
    INCLUDE (session_id, owner, approvers)
    WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL;
