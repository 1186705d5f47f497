// Package store is Sluice's record store, the database adapter of every
// domain: API keys (internal/auth), notifications, settings, templates and
// the outbox (notify.Store), digests (notify.DigestStore), the in-app inbox
// (inbox.Store), status event subscriptions and their log (events.Store),
// rate limit rules (limits.RuleStore), links (shorten.Store,
// shorten.StatsStore), and workflows with their events and runs
// (workflow.Store) and the user attributes their branches read, and topics
// and broadcasts with their progress (audience.Store). One
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
// # Group commit
//
// Callers with small writes (a notification and its deliveries, an
// attempt's outcome) hand them to a writer goroutine (groupcommit.go) that
// runs every write waiting at that moment in one transaction and wakes
// each caller when that transaction has committed. One fsync then serves
// many requests: with SQLite's synchronous=FULL, one transaction per
// request caps the write rate near the disk's fsync rate, whatever the CPU
// (docs/benchmarks.md, "Group commit: the disk's fsync rate"). Nothing
// waits on a timer: a batch is whatever queued up while the previous one
// committed, so a lone write commits at once and a burst shares commits.
//
// A write in a batch must not fail on purpose (use ON CONFLICT to detect
// duplicates): when any write fails, the batch is rolled back and each of
// its writes runs again in a transaction of its own, so one bad write
// cannot fail its neighbours and each caller gets its own error.
//
// # Pipelined group commit on PostgreSQL
//
// Through database/sql every statement is a round trip, and on a loaded
// machine a round trip costs far more than the statement, most of it spent
// waking the writer and the server in turn (context switches and
// syscalls; docs/benchmarks.md, "What changed, and what each change was
// worth", under Notifications). A write that also has a pipelined form
// (pgWrite, pipeline.go) queues its statements on a pgx batch instead;
// when every write of a group commit has one, BEGIN, all their statements
// and COMMIT go to the server in one message and their results come back
// in one read: one round trip per transaction.
//
// All statements are sent before any result is read, so a pipelined write
// cannot branch on a result: it does its branching in SQL (data-modifying
// CTEs). The two writes on the notification hot path
// (notifications_pipelined.go) are each one statement whose CTEs do what
// the database/sql form decides between statements: later writes happen
// only if the first one wrote a row (WHERE EXISTS on its RETURNING), and
// the statement selects how many rows the first one wrote. Parameters in a
// SELECT or a VALUES list that is not an INSERT's own carry their column's
// type (see migrations/postgres), which PostgreSQL cannot infer there.
//
// When the batch fails, the server skips every statement after the
// failing one up to the end of the batch, COMMIT included, and leaves the
// transaction open and aborted; it is rolled back and each write then runs
// alone through its database/sql form, as when a database/sql batch fails,
// so one bad write cannot fail its neighbours and each caller gets its own
// error.
//
// # Concurrency
//
// A *DB is safe for concurrent use. On SQLite, writes go through a pool of one
// connection whose transactions begin IMMEDIATE, and reads through a separate
// read-only pool; see [Open] for why.
package store
