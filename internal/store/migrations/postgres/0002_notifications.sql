-- Notifications: one row per accepted request. request_id is the durable
-- idempotency key (NULL when the caller gave none; UNIQUE allows many NULLs).
CREATE TABLE notifications (
    id           TEXT PRIMARY KEY,
    request_id   TEXT UNIQUE,
    request_hash TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    type         TEXT NOT NULL,
    category     TEXT NOT NULL,
    data         TEXT NOT NULL, -- JSON object
    channels     TEXT NOT NULL, -- JSON array of the requested channels; [] for all
    expires_at   BIGINT, -- Unix microseconds, UTC; NULL: never
    created_at   BIGINT NOT NULL -- Unix microseconds, UTC
);

CREATE INDEX notifications_user_created ON notifications (user_id, created_at, id);
CREATE INDEX notifications_created ON notifications (created_at);

-- Deliveries: one per notification and channel.
CREATE TABLE deliveries (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    category        TEXT NOT NULL,
    provider        TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL,
    error           TEXT NOT NULL,
    next_attempt_at BIGINT, -- due time of a delayed delivery; NULL once queued
    expires_at      BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (notification_id, channel)
);

-- The scheduler's two questions: which delayed deliveries are due, and
-- which queued ones have waited too long (the recovery sweep).
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'queued' AND next_attempt_at IS NOT NULL;
CREATE INDEX deliveries_stale ON deliveries (channel, category, updated_at) WHERE status = 'queued' AND next_attempt_at IS NULL;

CREATE TABLE notification_settings (
    user_id    TEXT PRIMARY KEY,
    settings   TEXT NOT NULL, -- JSON
    updated_at BIGINT NOT NULL
);

CREATE TABLE notification_templates (
    type       TEXT PRIMARY KEY,
    category   TEXT NOT NULL,
    channels   TEXT NOT NULL, -- JSON: channel -> locale -> {subject, body}
    updated_at BIGINT NOT NULL
);

CREATE TABLE dead_letters (
    id              TEXT PRIMARY KEY,
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    error           TEXT NOT NULL,
    attempts        BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    replayed_at     BIGINT
);

CREATE INDEX dead_letters_created ON dead_letters (created_at, id);
CREATE INDEX dead_letters_notification ON dead_letters (notification_id);

-- What the built-in outbox provider received. One row per delivery attempt
-- number, so a job redelivered after a crash adds nothing.
CREATE TABLE outbox (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel         TEXT NOT NULL,
    attempt         BIGINT NOT NULL,
    user_id         TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (notification_id, channel, attempt)
);

CREATE INDEX outbox_created ON outbox (created_at, notification_id, channel);
CREATE INDEX outbox_user_created ON outbox (user_id, created_at);
