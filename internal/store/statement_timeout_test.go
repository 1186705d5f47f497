package store

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// testStatementTimeout is short so that the tests are quick; they assert
// what fails and what does not, never how long anything took.
const testStatementTimeout = 200 * time.Millisecond

// openWithTimeout opens (and migrates) a store on url with statement
// timeout d.
func openWithTimeout(t *testing.T, url string, d time.Duration) *DB {
	t.Helper()
	return openMigrated(t, Options{URL: url, MaxOpenConns: 2, StatementTimeout: d})
}

// openMigrated opens a store with o, closed when the test ends, and
// applies every migration.
func openMigrated(t *testing.T, o Options) *DB {
	t.Helper()
	db, err := Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

// holdLocks runs stmts in a transaction on a connection of its own, which
// keeps the locks they take until release is called (or the test ends).
func holdLocks(t *testing.T, url string, stmts ...string) (release func()) {
	t.Helper()
	other, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tx, err := other.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(t.Context(), q); err != nil {
			tx.Rollback()
			t.Fatalf("%s: %v", q, err)
		}
	}
	release = func() { _ = tx.Rollback() }
	t.Cleanup(release)
	return release
}

// wantTimeout fails the test unless err is the Unavailable error of a
// statement cancelled past its timeout.
func wantTimeout(t *testing.T, what string, err error) {
	t.Helper()
	e, ok := errors.AsType[*apperr.Error](err)
	if !ok || e.Code != apperr.Unavailable || e.Message != timeoutMessage {
		t.Fatalf("%s = %v, want apperr Unavailable %q", what, err, timeoutMessage)
	}
}

// TestPostgresStatementTimeoutRequestPath holds a row lock from another
// connection: a request-path write that needs the row fails with
// Unavailable instead of waiting, and the pool serves afterwards.
func TestPostgresStatementTimeoutRequestPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	db := openWithTimeout(t, u, testStatementTimeout)
	if err := db.CreateAPIKey(ctx, auth.Key{ID: "k1", Name: "held", Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	release := holdLocks(t, u, `SELECT id FROM api_keys WHERE id = 'k1' FOR UPDATE`)

	// More calls than the pool has connections: a cancelled statement
	// gives its connection back.
	for range 3 {
		wantTimeout(t, "RevokeAPIKey of a locked key", db.RevokeAPIKey(ctx, "k1"))
	}
	// Rows nobody locked are served meanwhile.
	if err := db.CreateAPIKey(ctx, auth.Key{ID: "k2", Name: "free", Hash: "h2"}); err != nil {
		t.Fatalf("CreateAPIKey while k1 is locked: %v", err)
	}

	release()
	if err := db.RevokeAPIKey(ctx, "k1"); err != nil {
		t.Fatalf("RevokeAPIKey after the lock went: %v", err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// TestPostgresStatementTimeoutGroupCommit runs a batch in which one write
// waits for a row another connection holds: the transaction is cancelled
// and every caller gets the timeout (nothing was written), in both forms
// of the batch, without each write being retried alone.
func TestPostgresStatementTimeoutGroupCommit(t *testing.T) {
	t.Parallel()
	base := enginetest.PostgresURL(t)
	for _, pipelined := range []bool{true, false} {
		name := map[bool]string{true: "pipelined", false: "database/sql"}[pipelined]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			u := enginetest.PostgresSchema(t, base)
			db := openWithTimeout(t, u, testStatementTimeout)
			if _, err := db.exec(ctx, `INSERT INTO server_secrets (name, value, created_at) VALUES ('held', 'v', 0)`); err != nil {
				t.Fatal(err)
			}
			release := holdLocks(t, u, `SELECT name FROM server_secrets WHERE name = 'held' FOR UPDATE`)

			runs := 0
			write := func(q string, args ...any) *batchOp {
				op := &batchOp{ctx: ctx, done: make(chan error, 1)}
				q = db.Rebind(q)
				op.fn = func(ctx context.Context, tx *sql.Tx) error {
					runs++
					_, err := tx.ExecContext(ctx, q, args...)
					return err
				}
				if pipelined {
					op.pg = func(b *pgx.Batch) func(pgx.BatchResults) error {
						b.Queue(q, args...)
						return func(br pgx.BatchResults) error { _, err := br.Exec(); return err }
					}
				}
				return op
			}
			ops := []*batchOp{
				write(`INSERT INTO server_secrets (name, value, created_at) VALUES (?, 'v', 0)`, "w0"),
				write(`UPDATE server_secrets SET value = 'w1' WHERE name = ?`, "held"),
				write(`INSERT INTO server_secrets (name, value, created_at) VALUES (?, 'v', 0)`, "w2"),
			}
			db.gc.commit(ops)
			for i, op := range ops {
				wantTimeout(t, "write "+string(rune('0'+i)), mapErr(<-op.done, "write"))
			}
			wantRuns := 2 // the database/sql form ran w0 and w1, then stopped
			if pipelined {
				wantRuns = 0
			}
			if runs != wantRuns {
				t.Errorf("fn ran %d times, want %d (no write is retried alone after a timeout)", runs, wantRuns)
			}
			if got := settingNames(t, db); !slices.Equal(got, []string{"held"}) {
				t.Errorf("rows = %q, want only held (the batch was rolled back)", got)
			}

			release()
			next := write(`UPDATE server_secrets SET value = 'next' WHERE name = ?`, "held")
			db.gc.commit([]*batchOp{next})
			if err := <-next.done; err != nil {
				t.Fatalf("batch after the lock went: %v", err)
			}
		})
	}
}

// waitForLockWait polls until a backend of the database has waited, for
// longer than d by the server's clock, for a lock matching cond (a
// condition on pg_locks l), so that a statement timeout of d would have
// cancelled it. done is the waiting call's result: it fails the test if
// the call ends first.
func waitForLockWait(t *testing.T, url string, d time.Duration, done <-chan error, cond string, args ...any) {
	t.Helper()
	watcher, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	q := `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND clock_timestamp() - a.query_start > $1 * interval '1 millisecond' AND ` + cond
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := watcher.QueryRowContext(t.Context(), q, append([]any{2 * d.Milliseconds()}, args...)...).Scan(&n); err != nil {
			t.Fatalf("watch locks: %v", err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no backend waited for the lock")
		}
		select {
		case err := <-done:
			t.Fatalf("the call ended before waiting past the statement timeout: %v", err)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// schemaOf returns the search_path PostgresSchema put in u.
func schemaOf(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	s := parsed.Query().Get("search_path")
	if s == "" {
		t.Fatalf("no search_path in %s", u)
	}
	return s
}

// TestPostgresStatementTimeoutMigrate: a node migrating while another
// holds the migration lock for longer than the statement timeout waits
// for it instead of failing its start.
func TestPostgresStatementTimeoutMigrate(t *testing.T) {
	t.Parallel()
	u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	db, err := Open(t.Context(), Options{URL: u, MaxOpenConns: 2, StatementTimeout: testStatementTimeout})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	release := holdLocks(t, u, `SELECT pg_advisory_xact_lock(1936487785, hashtext(current_schema()))`)
	done := make(chan error, 1)
	go func() {
		_, err := db.Migrate(t.Context())
		done <- err
	}()
	waitForLockWait(t, u, testStatementTimeout, done,
		`l.locktype = 'advisory' AND l.classid = 1936487785 AND l.objid = (hashtext($2)::bigint & 4294967295)`, schemaOf(t, u))
	release()
	if err := <-done; err != nil {
		t.Fatalf("Migrate after waiting past the statement timeout: %v", err)
	}
	if pending, err := db.PendingMigrations(t.Context()); err != nil || len(pending) > 0 {
		t.Fatalf("PendingMigrations = %q, %v; want none", pending, err)
	}
}

// TestPostgresStatementTimeoutPurge: a background purge waiting for a
// table lock longer than the statement timeout is not cut short, while a
// request-path read of the same table is.
func TestPostgresStatementTimeoutPurge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	db := openWithTimeout(t, u, testStatementTimeout)
	release := holdLocks(t, u, `LOCK TABLE event_log IN ACCESS EXCLUSIVE MODE`)

	_, err := db.EventsSince(ctx, time.Time{}, "", 10)
	wantTimeout(t, "EventsSince of a locked table", err)

	done := make(chan error, 1)
	go func() {
		_, err := db.DeleteEventsBefore(ctx, time.Now(), 100)
		done <- err
	}()
	waitForLockWait(t, u, testStatementTimeout, done, `l.locktype = 'relation' AND l.relation = to_regclass($2)`,
		schemaOf(t, u)+".event_log")
	release()
	if err := <-done; err != nil {
		t.Fatalf("DeleteEventsBefore after waiting past the statement timeout: %v", err)
	}
}

// TestPostgresStatementTimeoutSetting checks the statement_timeout the
// pool's connections get: Options', unless the URL sets its own.
func TestPostgresStatementTimeoutSetting(t *testing.T) {
	t.Parallel()
	base := enginetest.PostgresURL(t)
	tests := []struct {
		name    string
		params  string // added to the URL
		timeout time.Duration
		want    string // SHOW statement_timeout
	}{
		{name: "from options", timeout: 1500 * time.Millisecond, want: "1500ms"},
		{name: "parameter in the url wins", params: "statement_timeout=60000", timeout: time.Second, want: "1min"},
		{name: "options in the url win", params: "options=-c%20statement_timeout%3D61s", timeout: time.Second, want: "61s"},
		{name: "zero sets none", timeout: 0, want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := enginetest.PostgresSchema(t, base)
			if tt.params != "" {
				u += "&" + tt.params
			}
			db := openWithTimeout(t, u, tt.timeout)
			var got string
			if err := db.queryRow(t.Context(), "SHOW statement_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("statement_timeout = %q, want %q", got, tt.want)
			}
		})
	}
}
