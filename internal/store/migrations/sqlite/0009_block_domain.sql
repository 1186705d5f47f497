-- An emergency block may name an Envoy domain: the block of the descriptor
-- entry remote_address=203.0.113.9 in domain edge alone. A key is blocked
-- at most once per policy and domain ('' is every policy, or no domain:
-- every domain and the HTTP API), so the domain joins the primary key,
-- which SQLite changes only by rebuilding the table.
CREATE TABLE ratelimit_blocks_new (
    key        TEXT NOT NULL,
    policy     TEXT NOT NULL,
    domain     TEXT NOT NULL, -- Envoy domain; '' for every domain
    reason     TEXT NOT NULL,
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, policy, domain)
) STRICT;

INSERT INTO ratelimit_blocks_new (key, policy, domain, reason, created_at, expires_at)
SELECT key, policy, '', reason, created_at, expires_at FROM ratelimit_blocks;

DROP TABLE ratelimit_blocks;
ALTER TABLE ratelimit_blocks_new RENAME TO ratelimit_blocks;

CREATE INDEX ratelimit_blocks_expires_at ON ratelimit_blocks (expires_at);
