-- Secrets the server generates once and every node sharing the database
-- uses: the dashboard's session and preference-link signing key. Kept in
-- the database, not the data dir, so two nodes behind one load balancer
-- accept each other's cookies and links.
CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL -- Unix microseconds, UTC
);
