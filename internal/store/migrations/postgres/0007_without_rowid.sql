-- SQLite's 0007 rebuilds deliveries and outbox as WITHOUT ROWID tables;
-- PostgreSQL keeps rows in a heap with separate indexes either way. Both
-- drop the outbox's index by user: GET /v1/outbox?user_id= finds the
-- user's notifications first, and an index keyed by user puts each new
-- entry on a random page.
DROP INDEX IF EXISTS outbox_user_created;
