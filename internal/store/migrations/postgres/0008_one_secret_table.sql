-- The shortener's code key moves from link_settings into server_secrets:
-- one table for the values a server generates once and every node sharing
-- the database uses (the code key, the dashboard's signing key).
INSERT INTO server_secrets (name, value, created_at)
SELECT name, value, (extract(epoch FROM now()) * 1000000)::BIGINT FROM link_settings
ON CONFLICT (name) DO NOTHING;

DROP TABLE link_settings;
