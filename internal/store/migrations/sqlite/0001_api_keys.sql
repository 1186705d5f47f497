-- API keys: only the SHA-256 hash of a secret is stored.
CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    prefix     TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    scopes     TEXT NOT NULL, -- JSON array of scope names
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    revoked_at INTEGER -- Unix microseconds, UTC; NULL while active
) STRICT;

CREATE INDEX api_keys_created_at_id ON api_keys (created_at, id);
