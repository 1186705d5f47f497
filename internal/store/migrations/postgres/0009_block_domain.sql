-- An emergency block may name an Envoy domain: the block of the descriptor
-- entry remote_address=203.0.113.9 in domain edge alone. A key is blocked
-- at most once per policy and domain ('' is every policy, or no domain:
-- every domain and the HTTP API), so the domain joins the primary key.
ALTER TABLE ratelimit_blocks ADD COLUMN domain TEXT NOT NULL DEFAULT '';
ALTER TABLE ratelimit_blocks DROP CONSTRAINT ratelimit_blocks_pkey;
ALTER TABLE ratelimit_blocks ADD PRIMARY KEY (key, policy, domain);
