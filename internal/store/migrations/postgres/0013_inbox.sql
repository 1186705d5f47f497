-- The in-app channel's inboxes (docs/notifications.md, "In-app inbox").
-- inbox_users numbers each user's messages: last_seq is the seq of the
-- user's newest message, the event id its streams resume from.
CREATE TABLE inbox_users (
    user_id  TEXT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);

-- One row per notification that reached a user's inbox; id is the
-- notification's id, so a retried delivery adds nothing.
CREATE TABLE inbox_messages (
    user_id     TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    id          TEXT NOT NULL,
    type        TEXT NOT NULL,
    category    TEXT NOT NULL,
    subject     TEXT NOT NULL,
    body        TEXT NOT NULL,
    data        TEXT NOT NULL, -- JSON object, or '' for none
    created_at  BIGINT NOT NULL, -- Unix microseconds, UTC
    read_at     BIGINT, -- NULL while unread
    archived_at BIGINT, -- NULL unless archived
    PRIMARY KEY (user_id, seq)
);

CREATE UNIQUE INDEX inbox_messages_id ON inbox_messages (user_id, id);
-- The unread count reads only unread rows.
CREATE INDEX inbox_messages_unread ON inbox_messages (user_id) WHERE read_at IS NULL AND archived_at IS NULL;
CREATE INDEX inbox_messages_created ON inbox_messages (created_at);
