-- Short links. ids come from link_ids (SQLite has no sequences); codes are
-- computed from the id in Go and stored, so a key change never moves one.
CREATE TABLE link_ids (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    next INTEGER NOT NULL -- the next id to hand out
) STRICT;
INSERT INTO link_ids (one, next) VALUES (1, 1);

CREATE TABLE links (
    id              INTEGER PRIMARY KEY,
    code            TEXT NOT NULL UNIQUE,
    url             TEXT NOT NULL,
    owner           TEXT NOT NULL, -- API key id; '' for keyless loopback clients and notifications
    notification_id TEXT, -- set on links made for a notification's message
    created_at      INTEGER NOT NULL, -- Unix microseconds, UTC
    expires_at      INTEGER, -- Unix microseconds, UTC; NULL: never
    clicks          INTEGER NOT NULL DEFAULT 0, -- human clicks
    bot_hits        INTEGER NOT NULL DEFAULT 0,
    first_click_at  INTEGER -- first human click, Unix microseconds, UTC
) STRICT;

CREATE INDEX links_owner_id ON links (owner, id);
CREATE INDEX links_expires_at ON links (expires_at) WHERE expires_at IS NOT NULL;
CREATE UNIQUE INDEX links_notification_url ON links (notification_id, url) WHERE notification_id IS NOT NULL;

-- One row per recorded hit, written in batches off the redirect path.
CREATE TABLE link_clicks (
    link_id INTEGER NOT NULL, -- no foreign key: a batch must not fail for a link deleted meanwhile
    at      INTEGER NOT NULL, -- Unix microseconds, UTC
    bot     INTEGER NOT NULL, -- 0 or 1
    reason  TEXT NOT NULL, -- why a bot's ('' for humans)
    visitor TEXT NOT NULL -- keyed hash of client address and user agent
) STRICT;

CREATE INDEX link_clicks_link_at ON link_clicks (link_id, at);

-- Settings the shortener keeps in the database so every node shares them
-- (the code key when the configuration names none).
CREATE TABLE link_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
