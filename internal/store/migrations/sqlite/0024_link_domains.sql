-- Custom short domains (docs/links.md "Custom domains"). A link may belong
-- to a registered domain ('' for none: it answers on every host not
-- registered as a domain), and its code is unique per domain, so the same
-- slug on two domains is two links. SQLite cannot drop the inline UNIQUE
-- on code, so the table is rebuilt with a (domain, code) index instead.
CREATE TABLE domains (
    domain       TEXT PRIMARY KEY, -- lowercase ASCII (IDNA A-labels), no port
    owner        TEXT NOT NULL, -- API key id; '' for keyless loopback clients
    fallback_url TEXT NOT NULL DEFAULT '', -- where unknown codes on it go; '' answers 404
    created_at   INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT, WITHOUT ROWID;

CREATE TABLE links_new (
    id              INTEGER PRIMARY KEY,
    domain          TEXT NOT NULL DEFAULT '',
    code            TEXT NOT NULL,
    url             TEXT NOT NULL,
    owner           TEXT NOT NULL,
    notification_id TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER,
    clicks          INTEGER NOT NULL DEFAULT 0,
    bot_hits        INTEGER NOT NULL DEFAULT 0,
    first_click_at  INTEGER,
    rules           TEXT,
    max_visits      INTEGER,
    visits          INTEGER NOT NULL DEFAULT 0,
    fallback_url    TEXT NOT NULL DEFAULT '',
    click_ids       INTEGER NOT NULL DEFAULT 0,
    conversions     INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO links_new (id, code, url, owner, notification_id, created_at, expires_at, clicks, bot_hits, first_click_at,
                       rules, max_visits, visits, fallback_url, click_ids, conversions)
SELECT id, code, url, owner, notification_id, created_at, expires_at, clicks, bot_hits, first_click_at,
       rules, max_visits, visits, fallback_url, click_ids, conversions FROM links;

DROP TABLE links;
ALTER TABLE links_new RENAME TO links;

CREATE UNIQUE INDEX links_domain_code ON links (domain, code);
CREATE INDEX links_owner_id ON links (owner, id);
CREATE INDEX links_owner_domain_id ON links (owner, domain, id);
CREATE INDEX links_expires_at ON links (expires_at) WHERE expires_at IS NOT NULL;
CREATE UNIQUE INDEX links_notification_url ON links (notification_id, url) WHERE notification_id IS NOT NULL;
CREATE INDEX links_top ON links (clicks DESC, bot_hits DESC, id DESC);
CREATE INDEX links_owner_top ON links (owner, clicks DESC, bot_hits DESC, id DESC);
