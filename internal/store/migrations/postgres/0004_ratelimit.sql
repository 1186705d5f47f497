-- Rate limit policies (the rules database). Every node caches them in
-- memory; changes reach the other nodes by a NATS announcement.
CREATE TABLE ratelimit_policies (
    name             TEXT PRIMARY KEY,
    algorithm        TEXT NOT NULL,
    limit_count      BIGINT NOT NULL,
    period_us        BIGINT NOT NULL, -- microseconds
    burst            BIGINT NOT NULL, -- 0: the limit
    mode             TEXT NOT NULL, -- hard, soft or shadow
    burst_over       BIGINT NOT NULL,
    on_store_failure TEXT NOT NULL, -- open or closed
    description      TEXT NOT NULL,
    created_at       BIGINT NOT NULL, -- Unix microseconds, UTC
    updated_at       BIGINT NOT NULL
);

-- Emergency blocks of one key, under one policy or every policy (policy '').
CREATE TABLE ratelimit_blocks (
    key        TEXT NOT NULL,
    policy     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    created_at BIGINT NOT NULL, -- Unix microseconds, UTC
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (key, policy)
);

CREATE INDEX ratelimit_blocks_expires_at ON ratelimit_blocks (expires_at);

-- The shipped tiers: token buckets with a one-minute burst.
INSERT INTO ratelimit_policies VALUES
    ('free', 'token_bucket', 60, 60000000, 60, 'hard', 0, 'open', 'shipped default tier', 0, 0),
    ('paid', 'token_bucket', 600, 60000000, 600, 'hard', 0, 'open', 'shipped default tier', 0, 0),
    ('enterprise', 'token_bucket', 6000, 60000000, 6000, 'hard', 0, 'open', 'shipped default tier', 0, 0);
