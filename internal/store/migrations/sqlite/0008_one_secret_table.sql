-- The shortener's code key moves from link_settings into server_secrets:
-- one table for the values a server generates once and every node sharing
-- the database uses (the code key, the dashboard's signing key).
INSERT INTO server_secrets (name, value, created_at)
SELECT name, value, CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM link_settings WHERE true
ON CONFLICT (name) DO NOTHING;

DROP TABLE link_settings;
