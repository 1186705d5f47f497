-- A policy may cap the debt after-the-fact charges push a key into
-- (docs/ratelimit.md, "Usage-based limits"); 0 is no cap.
ALTER TABLE ratelimit_policies ADD COLUMN max_debt BIGINT NOT NULL DEFAULT 0;
