-- Holdpoint session snapshots and audit trail (PostgreSQL). Never edit an
-- applied migration: add 0002_….sql and list it in src/schema.rs.
--
-- `data` is the whole snapshot as JSON (camelCase, as on the wire; `json`
-- keeps the text exactly as written); the other columns copy fields out of
-- it for lookups. Times are nanoseconds since the Unix epoch, so ordering
-- is exact. Ids compare bytewise (COLLATE "C"), as Rust strings do.
CREATE TABLE holdpoint_snapshots (
    snapshot_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    session_id      TEXT COLLATE "C" NOT NULL,
    parent_id       TEXT,
    created_at_ns   BIGINT NOT NULL,
    updated_at_ns   BIGINT NOT NULL,
    heartbeat_at_ns BIGINT,
    resumed_at_ns   BIGINT,
    status          TEXT   NOT NULL,
    finish_reason   TEXT,
    agent           TEXT,
    owner           TEXT,
    data            JSON   NOT NULL
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

-- Status changes are announced on channel holdpoint_snapshot_status as
-- "STATUS<tab>SNAPSHOT_ID", delivered at commit, so a watcher on any
-- replica hears an abort. Ids too long for a notification payload are
-- left to the watchers' periodic re-read.
CREATE FUNCTION holdpoint_notify_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status)
       AND octet_length(NEW.snapshot_id) < 7000 THEN
        PERFORM pg_notify('holdpoint_snapshot_status', NEW.status || E'\t' || NEW.snapshot_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER holdpoint_snapshots_notify_status
    AFTER INSERT OR UPDATE ON holdpoint_snapshots
    FOR EACH ROW EXECUTE FUNCTION holdpoint_notify_status();

-- The audit trail (SPEC §9.7): append-only; `seq` orders it.
CREATE TABLE holdpoint_audit (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id   TEXT   NOT NULL,
    at_ns       BIGINT NOT NULL,
    principal   TEXT,
    agent       TEXT,
    session_id  TEXT   NOT NULL,
    snapshot_id TEXT   NOT NULL,
    data        JSON   NOT NULL
);

CREATE INDEX holdpoint_audit_session ON holdpoint_audit (session_id, seq DESC);
CREATE INDEX holdpoint_audit_principal ON holdpoint_audit (principal, seq DESC);
CREATE INDEX holdpoint_audit_agent ON holdpoint_audit (agent, seq DESC);
