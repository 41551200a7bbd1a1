-- The paused calls of one agent (`pending`, the inbox, `count_waiting` of
-- an agent): the waiting rows by agent, newest first. Without it a listing
-- of one agent's waiting rows walked that agent's index from its newest
-- row and skipped every finished one, so its cost grew with the sessions
-- finished since the oldest waiting one. A row is in this index only while
-- it waits (the condition repeats the waiting listing's terms exactly), so
-- a write pays for it only when it pauses and when it is claimed.
CREATE INDEX holdpoint_snapshots_waiting_agent
    ON holdpoint_snapshots (agent, created_at_ns DESC, snapshot_id DESC)
    WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL;
