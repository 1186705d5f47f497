-- A policy's sync mode: '' (every check one atomic step on the shared
-- store) or 'local' (each node decides from its local share and syncs every
-- sync_interval_us; docs/ratelimit.md, "Local sync").
ALTER TABLE ratelimit_policies ADD COLUMN sync TEXT NOT NULL DEFAULT '';
ALTER TABLE ratelimit_policies ADD COLUMN sync_interval_us BIGINT NOT NULL DEFAULT 0;
