-- Digests and escalations (issue 21). A template's rules column holds its
-- type's digest and escalation rules as JSON ({"digest": ..., "escalation":
-- ...}); empty for none. Escalations need no table: a held-back channel is a
-- delivery delayed until the escalation is due, on the scheduler that
-- already runs retries and quiet hours.
ALTER TABLE notification_templates ADD COLUMN rules TEXT NOT NULL DEFAULT '';

-- One digest per window of one user, channel and type. At most one is open
-- (taking items) per user, channel and type: the partial unique index is
-- what makes the first event of a window open exactly one, on any number of
-- nodes. item_count is the number of items (appends lock the row, so it is
-- exact); closed is set when the window ends, the digest is full or it is
-- being sent; notification_id is the digest's message once it is saved.
CREATE TABLE digests (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL,
    channel         TEXT NOT NULL,
    type            TEXT NOT NULL,
    window_end      INTEGER NOT NULL, -- Unix microseconds: when the digest is due
    max_items       INTEGER NOT NULL,
    item_count      INTEGER NOT NULL,
    closed          INTEGER NOT NULL DEFAULT 0,
    notification_id TEXT REFERENCES notifications (id) ON DELETE CASCADE,
    created_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX digests_open ON digests (user_id, channel, type) WHERE closed = 0;
CREATE INDEX digests_due ON digests (window_end) WHERE notification_id IS NULL;
CREATE INDEX digests_notification ON digests (notification_id);

-- The events of a digest, numbered from 1 in the order they joined.
CREATE TABLE digest_items (
    digest_id       TEXT NOT NULL REFERENCES digests (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    data            TEXT NOT NULL, -- the event's data object
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (digest_id, seq)
) STRICT;

CREATE INDEX digest_items_notification ON digest_items (notification_id);
