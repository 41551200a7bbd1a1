-- Notification endpoints stopped for good (docs/reference.md §11.3): an
-- endpoint that answered HTTP 410 gets nothing more until an operator
-- re-enables it, on every replica and after a restart. `fingerprint` is a
-- hash of the endpoint's address (never the URL, which may hold a token);
-- a stop applies only while the channel still points there. Times are
-- nanoseconds since the Unix epoch.
CREATE TABLE holdpoint_notify_endpoints (
    channel       TEXT    NOT NULL PRIMARY KEY,
    fingerprint   TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    stopped_at_ns INTEGER NOT NULL
);
