-- Standing grants (docs/reference.md §10.9). `data` is the whole grant as
-- JSON and is authoritative; the other columns copy fields out of it for
-- lookups. A use or a revoke reads and rewrites a row inside the writer's
-- BEGIN IMMEDIATE transaction, which holds the database's write lock: two
-- handles or processes never spend one use twice. Times are nanoseconds
-- since the Unix epoch.
CREATE TABLE holdpoint_grants (
    seq           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    grant_id      TEXT    NOT NULL UNIQUE,
    agent         TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    created_at_ns INTEGER NOT NULL,
    expires_at_ns INTEGER,
    uses_left     INTEGER,
    revoked_at_ns INTEGER,
    data          TEXT    NOT NULL
);

-- The gate's lookup: the live grants of one agent's tool.
CREATE INDEX holdpoint_grants_live ON holdpoint_grants (agent, tool, created_at_ns DESC) WHERE revoked_at_ns IS NULL;
