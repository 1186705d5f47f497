-- SQLite's 0007 rebuilds deliveries and outbox as WITHOUT ROWID tables.
-- PostgreSQL keeps rows in a heap with separate indexes either way, so
-- there is nothing to change; this file keeps the two lists in step.
SELECT 1;
