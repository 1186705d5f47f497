package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/sluicehq/sluice/internal/apperr"
)

// Options configure [Open]. The zero value is invalid: set URL or DataDir.
type Options struct {
	// URL names the database: postgres:// or postgresql:// for PostgreSQL
	// (any pgx URL parameters, such as sslmode or search_path, pass
	// through), sqlite:PATH or file:PATH for a SQLite file. If empty, the
	// SQLite file DataDir/sluice.db is used.
	URL string
	// DataDir holds sluice.db when URL is empty; it is created with mode
	// 0700 if missing. Ignored when URL is set.
	DataDir string
	// Logger receives migration and lifecycle messages. If nil, nothing is
	// logged.
	Logger *slog.Logger
	// Now is the clock for times the store sets itself (revocation times,
	// migration times). If nil, time.Now is used.
	Now func() time.Time
	// MaxOpenConns caps connections to PostgreSQL, or the read pool on
	// SQLite (SQLite writes always use one connection). If zero, 10.
	MaxOpenConns int
	// MaxBatch caps how many callers' writes share one group-committed
	// transaction (see groupcommit.go). If zero, 512; 1 turns group commit
	// off (one transaction per write), for comparison.
	MaxBatch int
	// Writers is how many group-commit transactions run at once. SQLite
	// always uses 1 (it has one writer); if zero, PostgreSQL uses 4.
	Writers int
	// StatementTimeout, on PostgreSQL, is sent as statement_timeout when
	// each pooled connection starts: the server cancels a statement that
	// runs (or waits for a lock) longer, and the caller gets an apperr
	// Unavailable error (see timeoutMessage) instead of holding its request
	// and its connection until the client gives up. A statement_timeout in
	// URL (a statement_timeout parameter, or -c statement_timeout in
	// options or PGOPTIONS) wins over it. Migrations run without a timeout
	// and background purges with at least backgroundStatementTimeout (see
	// backgroundTx). If zero, none is set (the server's default applies).
	// SQLite ignores it: busy_timeout bounds the one wait it has.
	StatementTimeout time.Duration
	// LinkCreateRetry is how long [DB.CreateLinks] retries a transient
	// failure (apperr.ErrTransient: a connection refused or dropped,
	// PostgreSQL restarting) before returning it, never past ctx's
	// deadline or its retry deadline (apperr.WithRetryDeadline, which the
	// shortener's batches carry). If zero, apperr.RetryWindow; negative:
	// no retry.
	LinkCreateRetry time.Duration
}

// DB is an open record store. It is safe for concurrent use; Close it when
// done.
type DB struct {
	dialect string
	// write runs every write and every InTx transaction. On SQLite it is a
	// single connection beginning transactions IMMEDIATE; on PostgreSQL it
	// is the only pool and read == write.
	write *sql.DB
	read  *sql.DB
	log   *slog.Logger
	now   func() time.Time
	gc    *groupCommitter
	stmts sync.Map // query -> *sql.Stmt on the SQLite write connection; see writeStmt
	// readStmts holds prepared reads on the SQLite read pool (query ->
	// *sql.Stmt), at most maxReadStmts of them; see readStmt.
	readStmts     sync.Map
	readStmtCount atomic.Int32
	// rebound remembers Rebind's results on PostgreSQL (query -> query).
	rebound      sync.Map
	reboundCount atomic.Int32
	// statementTimeout is the statement_timeout Open set on PostgreSQL
	// connections, zero if it set none.
	statementTimeout time.Duration
	// linkCreateRetry is Options.LinkCreateRetry with its default.
	linkCreateRetry time.Duration
	// purgeEnds is where the click purge's walk ends (purgeend.go).
	purgeEnds purgeEnds
}

// maxReadStmts bounds the prepared reads kept: queries built with a
// varying number of placeholders would otherwise each keep one.
const maxReadStmts = 256

// Log attribute keys.
const (
	logKeyDialect   = "dialect"
	logKeyMigration = "migration"
)

// sqliteBusyTimeout is how long a SQLite connection waits for another
// process's lock before failing with SQLITE_BUSY (mapped to Unavailable).
const sqliteBusyTimeout = 10 * time.Second

// Open connects to the database named by opts and checks that it answers.
// It does not migrate: call [DB.Migrate] (sluice serve does at start,
// sluice migrate does only that).
//
// On SQLite, Open keeps two pools on one file in WAL mode with
// synchronous=FULL (a committed write survives power loss), foreign keys on
// and a busy timeout. Writes go through a pool of exactly one connection
// whose transactions start with BEGIN IMMEDIATE: writers in this process
// queue in database/sql for that connection instead of racing for SQLite's
// write lock, so they never see SQLITE_BUSY, and a transaction takes the
// write lock up front instead of upgrading from a read lock mid-way (the
// upgrade is what fails with SQLITE_BUSY regardless of busy_timeout).
// Another process on the same file waits up to busy_timeout. Reads use a
// separate query_only pool, which WAL lets run alongside the writer. The
// cost: code inside InTx must use its *sql.Tx, never other *DB methods,
// which would wait for the one write connection the transaction holds.
func Open(ctx context.Context, opts Options) (*DB, error) {
	t, err := parseTarget(opts.URL, opts.DataDir)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "%s", err.Error())
	}
	db := &DB{
		dialect: t.dialect,
		log:     cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		now:     opts.Now,

		linkCreateRetry: cmp.Or(opts.LinkCreateRetry, apperr.RetryWindow),
	}
	if db.now == nil {
		db.now = time.Now
	}
	maxConns := cmp.Or(opts.MaxOpenConns, 10)
	switch t.dialect {
	case DialectSQLite:
		err = db.openSQLite(ctx, t, maxConns)
	case DialectPostgres:
		err = db.openPostgres(ctx, t, maxConns, opts.StatementTimeout)
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	writers := cmp.Or(opts.Writers, 4)
	if db.dialect == DialectSQLite {
		writers = 1
	}
	db.gc = newGroupCommitter(db, writers, cmp.Or(opts.MaxBatch, 512))
	db.log.Debug("store open", slog.String(logKeyDialect, db.dialect))
	return db, nil
}

func (db *DB) openSQLite(ctx context.Context, t target, maxConns int) error {
	if t.dataDir != "" {
		if err := os.MkdirAll(t.dataDir, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	path := t.path
	if strings.ContainsRune(path, '?') {
		return fmt.Errorf("sqlite path %q: contains '?'", path)
	}
	if strings.HasPrefix(path, "file:") {
		path = "." + string(filepath.Separator) + path // keep the driver from reading a URI
	}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds())
	var err error
	db.write, err = sql.Open("sqlite", path+"?"+busy+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"+
		// The writer keeps its pages across transactions (readers drop
		// theirs whenever the file changes): 64 MiB instead of 2 MiB keeps
		// the indexes it updates at random in memory.
		"&_pragma=cache_size(-65536)")
	if err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)
	// The first connection creates the file and switches it to WAL, which
	// persists; check it took, since WAL is what lets reads run alongside
	// the writer (it fails on some network filesystems).
	var mode string
	if err := db.write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return mapErr(err, "open sqlite "+t.path)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("open sqlite %s: journal mode is %q, want wal", t.path, mode)
	}
	db.read, err = sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)&_pragma=foreign_keys(1)")
	if err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	db.read.SetMaxOpenConns(maxConns)
	db.read.SetMaxIdleConns(maxConns)
	return nil
}

func (db *DB) openPostgres(ctx context.Context, t target, maxConns int, timeout time.Duration) error {
	// Parse here rather than at the first connection, so a bad URL is
	// Invalid rather than Unavailable. pgx's parse errors mask the password.
	cfg, err := pgx.ParseConfig(t.url)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err, "invalid postgres url")
	}
	if timeout > 0 && !setsStatementTimeout(cfg.RuntimeParams) {
		// Sent in the startup message, so it holds on every connection
		// the pool opens, before any statement; SET LOCAL overrides it
		// for one transaction (migrations, backgroundTx).
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
		db.statementTimeout = timeout
	}
	db.write = stdlib.OpenDB(*cfg)
	db.read = db.write
	db.write.SetMaxOpenConns(maxConns)
	db.write.SetMaxIdleConns(maxConns)
	db.write.SetConnMaxIdleTime(5 * time.Minute)
	db.write.SetConnMaxLifetime(time.Hour)
	if err := db.Ping(ctx); err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	return nil
}

// setsStatementTimeout reports whether the operator's URL (or PGOPTIONS)
// already sets statement_timeout, which then wins over Options.
func setsStatementTimeout(params map[string]string) bool {
	if _, ok := params["statement_timeout"]; ok {
		return true
	}
	return strings.Contains(params["options"], "statement_timeout")
}

// backgroundStatementTimeout is the least statement_timeout a background
// purge runs with (see backgroundTx): purges delete in bounded chunks, but
// one chunk on a large, busy table may take longer than a request may, and
// a chunk cut short would be cut again at every run. Bounded still, so a
// purge stuck on a lock gives its connection back.
const backgroundStatementTimeout = 5 * time.Minute

// backgroundTx is InTx for background jobs that may run longer than a
// request: on PostgreSQL, when Open set a statement_timeout shorter than
// backgroundStatementTimeout, the transaction raises it to that with SET
// LOCAL. A statement_timeout from the operator's URL is left alone.
func (db *DB) backgroundTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return db.InTx(ctx, func(tx *sql.Tx) error {
		if db.statementTimeout > 0 && db.statementTimeout < backgroundStatementTimeout {
			if err := setLocalStatementTimeout(ctx, tx, backgroundStatementTimeout); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// backgroundExec is exec for a background purge's single statement, run
// in backgroundTx. Errors are not yet mapped.
func (db *DB) backgroundExec(ctx context.Context, q string, args ...any) (res sql.Result, err error) {
	err = db.backgroundTx(ctx, func(tx *sql.Tx) error {
		res, err = tx.ExecContext(ctx, db.Rebind(q), args...)
		return err
	})
	return res, err
}

// setLocalStatementTimeout sets statement_timeout for the rest of tx (0
// means none). Only for PostgreSQL.
func setLocalStatementTimeout(ctx context.Context, tx *sql.Tx, d time.Duration) error {
	_, err := tx.ExecContext(ctx, "SET LOCAL statement_timeout = "+strconv.FormatInt(d.Milliseconds(), 10))
	return mapErr(err, "set statement timeout")
}

// Dialect returns "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.dialect }

// Rebind rewrites a query written with ? placeholders for this database's
// dialect ($1, $2, ... on PostgreSQL). Use it for queries run on the
// *sql.Tx given by InTx.
// On PostgreSQL the result is remembered (for up to maxRebound distinct
// queries): the hot writes rebind the same text on every call, and
// scanning it again was a visible share of the writer's CPU.
func (db *DB) Rebind(query string) string {
	if db.dialect != DialectPostgres {
		return query
	}
	if q, ok := db.rebound.Load(query); ok {
		return q.(string)
	}
	q := rebind(db.dialect, query)
	if db.reboundCount.Load() < maxRebound {
		if _, loaded := db.rebound.LoadOrStore(query, q); !loaded {
			db.reboundCount.Add(1)
		}
	}
	return q
}

// maxRebound bounds the rebound queries remembered: queries built with a
// varying number of rows would otherwise each keep one.
const maxRebound = 1024

// Ping checks that the engine answers now, by running a query on a pooled
// connection (for SQLite, one that reads the file's schema). Any failure is
// an apperr Unavailable error.
func (db *DB) Ping(ctx context.Context) error {
	q := "SELECT 1"
	if db.dialect == DialectSQLite {
		q = "SELECT count(*) FROM sqlite_schema"
	}
	var n int
	if err := db.read.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return apperr.Wrap(apperr.Unavailable, fmt.Errorf("ping %s: %w", db.dialect, err), unavailableMessage)
	}
	return nil
}

// Close closes every connection. On SQLite, closing the last connection
// checkpoints the WAL into the main file.
func (db *DB) Close() error {
	if db.gc != nil {
		db.gc.close()
	}
	for _, m := range []*sync.Map{&db.stmts, &db.readStmts} {
		m.Range(func(_, st any) bool {
			st.(*sql.Stmt).Close()
			return true
		})
	}
	var errs []error
	if db.read != nil && db.read != db.write {
		errs = append(errs, db.read.Close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// InTx runs fn in a transaction, committing when fn returns nil and rolling
// back when it returns an error (returned unchanged) or panics (the panic
// continues). Inside fn, use tx only, with queries passed through
// db.Rebind: on SQLite the transaction holds the only write connection, so
// calling other *DB methods from fn would wait for it forever.
func (db *DB) InTx(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err, "begin transaction")
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // the error that got us here matters more
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return mapErr(err, "commit transaction")
	}
	committed = true
	return nil
}

// exec runs a write with ? placeholders. Errors are not yet mapped.
func (db *DB) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return db.write.ExecContext(ctx, db.Rebind(q), args...)
}

// readCtx is the context a read runs on. On SQLite it cannot end: a local
// read cannot hang (busy_timeout bounds waiting for another process), and
// a context that can end costs two goroutines per query (one in
// database/sql, one in the driver), which under load was a large part of
// every read. PostgreSQL reads keep ctx: the network can hang.
func (db *DB) readCtx(ctx context.Context) context.Context {
	if db.dialect == DialectSQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// query runs a read with ? placeholders on the read pool.
func (db *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = db.readCtx(ctx)
	if st := db.readStmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.read.QueryContext(ctx, db.Rebind(q), args...)
}

// queryRow runs a one-row read with ? placeholders on the read pool.
func (db *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = db.readCtx(ctx)
	if st := db.readStmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.read.QueryRowContext(ctx, db.Rebind(q), args...)
}

// readStmt returns q prepared on the SQLite read pool (database/sql
// prepares it once per connection), or nil on PostgreSQL (pgx caches
// prepared statements itself), when the cache is full, or when preparing
// fails (the caller then runs q unprepared and reports the error). Under
// load, parsing a read's SQL on every call cost as much as running it.
func (db *DB) readStmt(ctx context.Context, q string) *sql.Stmt {
	if db.dialect != DialectSQLite {
		return nil
	}
	if st, ok := db.readStmts.Load(q); ok {
		return st.(*sql.Stmt)
	}
	if db.readStmtCount.Load() >= maxReadStmts {
		return nil
	}
	prepared, err := db.read.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	st, loaded := db.readStmts.LoadOrStore(q, prepared)
	if loaded {
		prepared.Close()
	} else {
		db.readStmtCount.Add(1)
	}
	return st.(*sql.Stmt)
}
