-- Short links. ids come from links_id_seq; codes are computed from the id in
-- Go and stored, so a key change never moves one.
CREATE SEQUENCE links_id_seq;

CREATE TABLE links (
    id              BIGINT PRIMARY KEY,
    code            TEXT NOT NULL UNIQUE,
    url             TEXT NOT NULL,
    owner           TEXT NOT NULL, -- API key id; '' for keyless loopback clients and notifications
    notification_id TEXT, -- set on links made for a notification's message
    created_at      BIGINT NOT NULL, -- Unix microseconds, UTC
    expires_at      BIGINT, -- Unix microseconds, UTC; NULL: never
    clicks          BIGINT NOT NULL DEFAULT 0, -- human clicks
    bot_hits        BIGINT NOT NULL DEFAULT 0,
    first_click_at  BIGINT -- first human click, Unix microseconds, UTC
);

CREATE INDEX links_owner_id ON links (owner, id);
CREATE INDEX links_expires_at ON links (expires_at) WHERE expires_at IS NOT NULL;
CREATE UNIQUE INDEX links_notification_url ON links (notification_id, url) WHERE notification_id IS NOT NULL;

-- One row per recorded hit, written in batches off the redirect path.
CREATE TABLE link_clicks (
    link_id BIGINT NOT NULL, -- no foreign key: a batch must not fail for a link deleted meanwhile
    at      BIGINT NOT NULL, -- Unix microseconds, UTC
    bot     BIGINT NOT NULL, -- 0 or 1
    reason  TEXT NOT NULL, -- why a bot's ('' for humans)
    visitor TEXT NOT NULL -- keyed hash of client address and user agent
);

CREATE INDEX link_clicks_link_at ON link_clicks (link_id, at);

-- Settings the shortener keeps in the database so every node shares them
-- (the code key when the configuration names none).
CREATE TABLE link_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
