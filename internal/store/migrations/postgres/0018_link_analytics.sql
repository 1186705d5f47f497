-- Visit limits, attribution and analytics by dimension (docs/links.md).
-- max_visits is NULL for a link without a limit; visits counts the human
-- visits a limited link has let through (the store decides, one atomic
-- conditional UPDATE per visit, so the count is exact across nodes).
ALTER TABLE links ADD COLUMN max_visits BIGINT;
ALTER TABLE links ADD COLUMN visits BIGINT NOT NULL DEFAULT 0;
-- Where an expired or used-up link redirects instead of answering 410.
ALTER TABLE links ADD COLUMN fallback_url TEXT NOT NULL DEFAULT '';
-- 1: each redirect appends a signed sluice_cid click id to the target.
ALTER TABLE links ADD COLUMN click_ids BIGINT NOT NULL DEFAULT 0;
ALTER TABLE links ADD COLUMN conversions BIGINT NOT NULL DEFAULT 0;

-- The dimensions of a click, kept small: source and device/os as small
-- integer codes, country and language as two letters, the referrer as its
-- host only ('' when none, the usual case for links sent by SMS), and the
-- click id only for links that ask for one.
ALTER TABLE link_clicks ADD COLUMN source SMALLINT NOT NULL DEFAULT 0; -- 0 link, 1 qr
ALTER TABLE link_clicks ADD COLUMN country TEXT NOT NULL DEFAULT '';
ALTER TABLE link_clicks ADD COLUMN device SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE link_clicks ADD COLUMN os SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE link_clicks ADD COLUMN language TEXT NOT NULL DEFAULT '';
ALTER TABLE link_clicks ADD COLUMN referrer TEXT NOT NULL DEFAULT '';
ALTER TABLE link_clicks ADD COLUMN click_id TEXT;

-- Per link, per hour, per dimension value counters, upserted by the click
-- flusher in the transaction that writes the clicks, so that stats never
-- scan raw clicks. dim: 1 country, 2 device, 3 os, 4 referrer, 5 language,
-- 6 source (every click has one, so the source rows sum to the totals).
CREATE TABLE link_rollups (
    link_id BIGINT NOT NULL,
    hour    BIGINT NOT NULL, -- Unix hours, UTC
    dim     BIGINT NOT NULL,
    value   TEXT NOT NULL,
    humans  BIGINT NOT NULL DEFAULT 0,
    bots    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (link_id, hour, dim, value)
);

-- A lead or sale recorded against a click, once per (click, event).
CREATE TABLE link_conversions (
    click_id        TEXT NOT NULL,
    event           TEXT NOT NULL,
    link_id         BIGINT NOT NULL,
    notification_id TEXT, -- the link's notification, for links made from a message
    value           DOUBLE PRECISION NOT NULL DEFAULT 0,
    at              BIGINT NOT NULL, -- Unix microseconds, UTC
    PRIMARY KEY (click_id, event)
);

CREATE INDEX link_conversions_link_at ON link_conversions (link_id, at);
CREATE INDEX link_conversions_notification ON link_conversions (notification_id) WHERE notification_id IS NOT NULL;
