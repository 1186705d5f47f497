// Package store is Sluice's record store, the database adapter of every
// domain: API keys (internal/auth), notifications, settings, templates and
// the outbox (notify.Store), digests (notify.DigestStore), the in-app inbox
// (inbox.Store), status event subscriptions and their log (events.Store),
// rate limit rules (limits.RuleStore) and links (shorten.Store,
// shorten.StatsStore). One
// implementation over database/sql serves both engines, so embedded and
// external share all code above the connection:
//
//   - SQLite (modernc.org/sqlite, no cgo) in <DataDir>/sluice.db, the
//     embedded default;
//   - PostgreSQL (pgx through database/sql) for many Sluice nodes sharing one
//     database.
//
// # Dialect seam
//
// Queries are written once, with ? placeholders, and [DB.Rebind] turns them
// into $1, $2, ... for PostgreSQL. Column types are chosen to mean the same
// on both engines: times are BIGINT Unix microseconds in UTC (converted in Go
// by toMicros and fromMicros), JSON is TEXT, booleans are BIGINT 0/1. Both
// engines support ON CONFLICT and RETURNING, so upserts are written once too.
// Only the DDL differs, which is why migrations come in one folder per
// dialect.
//
// # Errors
//
// Methods return *apperr.Error values the HTTP edge maps to statuses:
// NotFound for absent rows, Conflict for unique violations (SQLite's
// SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY and PostgreSQL's 23505), and
// Unavailable when the engine cannot be reached, so /readyz and the API
// answer 503 rather than 500.
//
// # Adding a table
//
// A domain that needs storage (notifications, policies, links) adds, in this
// package:
//
//  1. one migration per dialect with the same name and the next number,
//     migrations/sqlite/NNNN_name.sql and migrations/postgres/NNNN_name.sql
//     (SQLite tables are STRICT, so use INTEGER and TEXT there and BIGINT and
//     TEXT in PostgreSQL; never edit a migration that has shipped);
//  2. a file of methods on *DB (see apikeys.go): queries with ? placeholders
//     run through db.exec, db.queryRow and db.query, which rebind them, route
//     reads and writes to the right SQLite pool and map errors; inside
//     [DB.InTx] use tx with db.Rebind and mapErr;
//  3. conformance cases in storetest, run by store_test.go against both
//     engines, that pin the behaviour callers rely on.
//
// # Concurrency
//
// A *DB is safe for concurrent use. On SQLite, writes go through a pool of one
// connection whose transactions begin IMMEDIATE, and reads through a separate
// read-only pool; see [Open] for why.
package store
