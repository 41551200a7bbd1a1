-- Holdpoint session snapshots and audit trail (SQLite). Never edit an
-- applied migration: add 0002_….sql and list it in src/schema.rs.
--
-- `data` is the whole snapshot as JSON (camelCase, as on the wire); the
-- other columns copy fields out of it for lookups. Times are nanoseconds
-- since the Unix epoch, so ordering is exact.
CREATE TABLE holdpoint_snapshots (
    snapshot_id     TEXT    NOT NULL PRIMARY KEY,
    session_id      TEXT    NOT NULL,
    parent_id       TEXT,
    created_at_ns   INTEGER NOT NULL,
    updated_at_ns   INTEGER NOT NULL,
    heartbeat_at_ns INTEGER,
    resumed_at_ns   INTEGER,
    status          TEXT    NOT NULL,
    finish_reason   TEXT,
    agent           TEXT,
    owner           TEXT,
    data            TEXT    NOT NULL
);

-- get_latest_snapshot: greatest created_at, ties by greatest snapshot_id.
CREATE INDEX holdpoint_snapshots_latest
    ON holdpoint_snapshots (session_id, created_at_ns DESC, snapshot_id DESC);

-- Listings by agent or owner, newest first.
CREATE INDEX holdpoint_snapshots_agent ON holdpoint_snapshots (agent, created_at_ns DESC);
CREATE INDEX holdpoint_snapshots_owner ON holdpoint_snapshots (owner, created_at_ns DESC);

-- Running (pending/aborting) rows.
CREATE INDEX holdpoint_snapshots_status ON holdpoint_snapshots (status);

-- Snapshots waiting for an answer (SPEC §9.8).
CREATE INDEX holdpoint_snapshots_waiting
    ON holdpoint_snapshots (created_at_ns DESC, snapshot_id DESC)
    WHERE status = 'completed' AND finish_reason = 'interrupted' AND resumed_at_ns IS NULL;

-- The audit trail (SPEC §9.7): append-only; `seq` orders it.
CREATE TABLE holdpoint_audit (
    seq         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    record_id   TEXT    NOT NULL,
    at_ns       INTEGER NOT NULL,
    principal   TEXT,
    agent       TEXT,
    session_id  TEXT    NOT NULL,
    snapshot_id TEXT    NOT NULL,
    data        TEXT    NOT NULL
);

CREATE INDEX holdpoint_audit_session ON holdpoint_audit (session_id, seq DESC);
CREATE INDEX holdpoint_audit_principal ON holdpoint_audit (principal, seq DESC);
CREATE INDEX holdpoint_audit_agent ON holdpoint_audit (agent, seq DESC);
