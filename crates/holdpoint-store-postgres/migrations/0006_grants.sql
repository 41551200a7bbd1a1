-- Standing grants (docs/reference.md §10.9). `data` is the whole grant as
-- JSON and is authoritative; the other columns copy fields out of it for
-- lookups. A use or a revoke locks the row (`FOR UPDATE`), checks it and
-- rewrites it in one transaction with its audit records, so replicas
-- never spend one use twice. Times are nanoseconds since the Unix epoch.
CREATE TABLE holdpoint_grants (
    seq           BIGSERIAL PRIMARY KEY,
    grant_id      TEXT COLLATE "C" NOT NULL UNIQUE,
    agent         TEXT   NOT NULL,
    tool          TEXT   NOT NULL,
    created_at_ns BIGINT NOT NULL,
    expires_at_ns BIGINT,
    uses_left     BIGINT,
    revoked_at_ns BIGINT,
    data          TEXT   NOT NULL
);

-- The gate's lookup: the live grants of one agent's tool.
CREATE INDEX holdpoint_grants_live ON holdpoint_grants (agent, tool, created_at_ns DESC) WHERE revoked_at_ns IS NULL;
