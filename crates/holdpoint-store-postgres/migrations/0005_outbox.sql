-- The outbox of hold events and timers (docs/reference.md §11.3). A row is
-- written in the same transaction as the change it reports; delivery
-- workers on any number of replicas claim due rows with
-- `FOR UPDATE SKIP LOCKED` and a lease, so each row is in flight on one
-- replica at a time. `data` is the whole event as JSON and is
-- authoritative; the other columns copy fields out of it for lookups,
-- except `lease_token`, which only the claim and the settle read. Times
-- are nanoseconds since the Unix epoch.
CREATE TABLE holdpoint_outbox (
    seq            BIGSERIAL PRIMARY KEY,
    event_id       TEXT COLLATE "C" NOT NULL UNIQUE,
    snapshot_id    TEXT COLLATE "C" NOT NULL,
    state          TEXT   NOT NULL,
    due_at_ns      BIGINT NOT NULL,
    lease_until_ns BIGINT,
    lease_token    TEXT,
    data           JSON   NOT NULL
);

-- The claim: pending rows by due time. Settled rows leave the index.
CREATE INDEX holdpoint_outbox_due ON holdpoint_outbox (due_at_ns) WHERE state = 'pending';
