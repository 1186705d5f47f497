-- Revocation of inbox tokens (docs/notifications.md, "Revoking inbox
-- tokens"). A user's tokens carry the generation they were minted at;
-- revoking bumps it, and tokens of an older generation are refused. No row:
-- generation 0, that of every token minted before any revocation.
CREATE TABLE inbox_token_generations (
    user_id    TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    revoked_at INTEGER NOT NULL -- Unix microseconds, UTC, of the last revocation
) WITHOUT ROWID;
