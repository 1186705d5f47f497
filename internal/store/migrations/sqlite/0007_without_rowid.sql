-- Deliveries and outbox entries are nearly always reached through their primary
-- key, and a notification writes several of each. As ordinary (rowid)
-- tables, each row lived twice, in the table and in its primary key's
-- index, so every insert wrote two b-trees and every lookup searched two.
-- WITHOUT ROWID keeps the row in the primary key's b-tree: under the
-- notification benchmark the writer's statements and the workers' state
-- reads got cheaper, and each commit writes fewer pages. Their rows are
-- small (no notification data), which is where WITHOUT ROWID pays.
CREATE TABLE deliveries_new (
    notification_id     TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel             TEXT NOT NULL,
    user_id             TEXT NOT NULL,
    category            TEXT NOT NULL,
    provider            TEXT NOT NULL,
    status              TEXT NOT NULL,
    attempts            INTEGER NOT NULL,
    error               TEXT NOT NULL,
    next_attempt_at     INTEGER, -- due time of a delayed delivery; NULL once queued
    expires_at          INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    provider_message_id TEXT NOT NULL DEFAULT '',
    hops                TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notification_id, channel)
) STRICT, WITHOUT ROWID;

INSERT INTO deliveries_new (notification_id, channel, user_id, category, provider, status, attempts, error,
    next_attempt_at, expires_at, created_at, updated_at, provider_message_id, hops)
SELECT notification_id, channel, user_id, category, provider, status, attempts, error,
    next_attempt_at, expires_at, created_at, updated_at, provider_message_id, hops
FROM deliveries;

DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;

CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'queued' AND next_attempt_at IS NOT NULL;
CREATE INDEX deliveries_stale ON deliveries (channel, category, updated_at) WHERE status = 'queued' AND next_attempt_at IS NULL;

CREATE TABLE outbox_new (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    user_id         TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (notification_id, channel, attempt)
) STRICT, WITHOUT ROWID;

INSERT INTO outbox_new SELECT notification_id, channel, attempt, user_id, recipient, subject, body, created_at FROM outbox;

DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;

CREATE INDEX outbox_created ON outbox (created_at, notification_id, channel);
-- No index by user: GET /v1/outbox?user_id= finds the user's
-- notifications first (notifications_user_created). An index keyed by user
-- puts each new entry on a random page: a page written per message.
