-- Audiences (docs/notifications.md, "Audiences"): topics and their
-- subscribers, and broadcasts to them with their progress. A broadcast's
-- row is its progress: every node's sender claims a due one (due_at) with
-- a lease, seq is the token of its writes, and each group (one per
-- timezone for a local-time send) keeps the last user id it sent.

-- One row per topic with its subscriber count, kept by every subscribe
-- and unsubscribe: the node's caps read these rows, not the subscribers.
CREATE TABLE topics (
    key         TEXT PRIMARY KEY,
    subscribers INTEGER NOT NULL, -- rows in topic_subscribers
    created_at  INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT;

-- A topic's subscribers, read in user id order by the broadcasts.
CREATE TABLE topic_subscribers (
    topic      TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    PRIMARY KEY (topic, user_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE broadcasts (
    id         TEXT PRIMARY KEY, -- bc_..., sorting by creation time
    request_id TEXT NOT NULL UNIQUE, -- the caller's idempotency key
    hash       TEXT NOT NULL, -- digest of the request: the same request_id with another body is refused
    type       TEXT NOT NULL, -- the notification type
    topic      TEXT NOT NULL DEFAULT '', -- the audience: a topic key
    segment    TEXT NOT NULL DEFAULT '', -- or a segment key
    data       TEXT NOT NULL, -- JSON object
    channels   TEXT NOT NULL, -- JSON array; [] for all
    send_at    INTEGER NOT NULL, -- Unix microseconds, UTC
    local_time TEXT NOT NULL DEFAULT '', -- HH:MM of a local-time send; '' for none
    local_date TEXT NOT NULL DEFAULT '', -- YYYY-MM-DD of a local-time send
    status     TEXT NOT NULL, -- scheduled, sending, done, canceled
    planned    INTEGER NOT NULL, -- 1 once its groups exist
    targeted   INTEGER NOT NULL DEFAULT 0,
    accepted   INTEGER NOT NULL DEFAULT 0,
    skipped    INTEGER NOT NULL DEFAULT 0,
    due_at     INTEGER, -- Unix microseconds, UTC: when a sender claims it next; NULL once final
    seq        INTEGER NOT NULL, -- bumped by every write: the token of the sender's writes
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    updated_at INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT;

CREATE INDEX broadcasts_due ON broadcasts (due_at) WHERE due_at IS NOT NULL;

-- A broadcast's groups: one per timezone for a local-time send (timezone
-- '' for a send at a time), each with its due time and progress.
CREATE TABLE broadcast_groups (
    broadcast_id TEXT NOT NULL,
    timezone     TEXT NOT NULL, -- IANA name; '' for the one group of a send at a time
    due_at       INTEGER NOT NULL, -- Unix microseconds, UTC
    last_user    TEXT NOT NULL DEFAULT '', -- the cursor: the last user id sent
    status       TEXT NOT NULL, -- pending, done
    PRIMARY KEY (broadcast_id, timezone)
) STRICT, WITHOUT ROWID;
