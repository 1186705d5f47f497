-- Whether an API key was ever created (docs/security.md, "Keyless mode"):
-- keyless loopback access lasts only until the first key is created, and
-- revoking every key afterwards leaves the API closed, not keyless. One
-- row once the first key is created, never deleted; a database that has
-- keys (revoked ones too) already gets it here.
CREATE TABLE api_keys_created (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    first_at INTEGER NOT NULL -- Unix microseconds, UTC, of the first key's creation
);
INSERT INTO api_keys_created (id, first_at)
    SELECT 1, MIN(created_at) FROM api_keys HAVING COUNT(*) > 0;
