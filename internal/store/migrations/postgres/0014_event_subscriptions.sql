-- Status events out (issue 21): subscriptions, with their failure run, and
-- the event log that recover reads (kept events.retention).
CREATE TABLE event_subscriptions (
    id                     TEXT PRIMARY KEY,
    url                    TEXT NOT NULL,
    events                 TEXT NOT NULL, -- JSON array of event types
    secret                 TEXT NOT NULL, -- whsec_...
    disable_after          BIGINT NOT NULL, -- microseconds; 0: never by time
    disable_after_failures INTEGER NOT NULL, -- 0: never by count
    created_at             BIGINT NOT NULL, -- Unix microseconds, UTC
    failures               INTEGER NOT NULL DEFAULT 0,
    first_failure_at       BIGINT, -- NULL: no failure run
    last_failure_at        BIGINT,
    last_error             TEXT NOT NULL DEFAULT '',
    last_success_at        BIGINT,
    disabled_at            BIGINT, -- NULL: enabled
    disabled_reason        TEXT NOT NULL DEFAULT ''
);

CREATE TABLE event_log (
    id   TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    data TEXT NOT NULL, -- JSON object
    at   BIGINT NOT NULL -- Unix microseconds, UTC
);

CREATE INDEX event_log_at_id ON event_log (at, id);
