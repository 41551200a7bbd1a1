-- The outbox of hold events and timers (docs/reference.md §11.3). A row is
-- written in the same transaction as the change it reports; a delivery
-- worker claims due rows by compare-and-set on the lease columns (inside
-- the writer's BEGIN IMMEDIATE transaction), so each row is in flight in
-- one process at a time. `data` is the whole event as JSON and is
-- authoritative; the other columns copy fields out of it for lookups,
-- except `lease_token`, which only the claim and the settle read. Times
-- are nanoseconds since the Unix epoch.
CREATE TABLE holdpoint_outbox (
    seq            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    event_id       TEXT    NOT NULL UNIQUE,
    snapshot_id    TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    due_at_ns      INTEGER NOT NULL,
    lease_until_ns INTEGER,
    lease_token    TEXT,
    data           TEXT    NOT NULL
);

-- The claim: pending rows by due time. Settled rows leave the index.
CREATE INDEX holdpoint_outbox_due ON holdpoint_outbox (due_at_ns) WHERE state = 'pending';
