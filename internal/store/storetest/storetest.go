// Package storetest is the conformance suite for store.DB: one set of tests
// that every engine (SQLite, PostgreSQL) must pass, so the behaviour callers
// rely on is pinned in one place. A domain that adds tables to store adds
// its cases here, in a file of its own, called from Run.
package storetest

import (
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/store"
)

// Run runs the suite. open must return a new, empty, unmigrated database of
// its own on each call, closed by t.Cleanup; subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) *store.DB) {
	t.Helper()
	s := suite{open: open}
	t.Run("Migrations", s.migrations)
	t.Run("ConcurrentMigrate", s.concurrentMigrate)
	t.Run("PingAndDialect", s.pingAndDialect)
	t.Run("InTx", s.inTx)
	t.Run("APIKeys", s.apiKeys)
	t.Run("Ratelimit", s.ratelimit)
	t.Run("Links", s.links)
	t.Run("LinkAnalytics", s.linkAnalytics)
	t.Run("Domains", s.domains)
	t.Run("Dashboard", s.dashboard)
	t.Run("Notifications", s.notifications)
	t.Run("Digests", s.digests)
	t.Run("EventSubscriptions", s.eventSubs)
	t.Run("Inbox", s.inbox)
	t.Run("EmailLinks", s.emailLinks)
	t.Run("Workflows", s.workflows)
	t.Run("Audiences", s.audiences)
}

type suite struct {
	open func(t *testing.T) *store.DB
}

// migrated opens a database and applies every migration.
func (s suite) migrated(t *testing.T) *store.DB {
	t.Helper()
	db := s.open(t)
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

func (s suite) migrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.open(t)

	pending, err := db.PendingMigrations(ctx)
	if err != nil {
		t.Fatalf("PendingMigrations on an empty database: %v", err)
	}
	if len(pending) == 0 || pending[0] != "0001_api_keys" || !slices.IsSorted(pending) {
		t.Fatalf("PendingMigrations on an empty database = %q, want a sorted list starting with 0001_api_keys", pending)
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if !slices.Equal(applied, pending) {
		t.Errorf("Migrate applied %q, want the pending %q", applied, pending)
	}
	if got, err := db.PendingMigrations(ctx); err != nil || len(got) != 0 {
		t.Errorf("PendingMigrations after Migrate = %q, %v; want none", got, err)
	}
	again, err := db.Migrate(ctx)
	if err != nil || len(again) != 0 {
		t.Errorf("second Migrate = %q, %v; want nothing applied", again, err)
	}
}

func (s suite) concurrentMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.open(t)
	pending, err := db.PendingMigrations(ctx)
	if err != nil {
		t.Fatalf("PendingMigrations: %v", err)
	}
	var (
		mu  sync.Mutex
		all []string
		wg  sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			applied, err := db.Migrate(ctx)
			if err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
			mu.Lock()
			all = append(all, applied...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	if !slices.Equal(all, pending) {
		t.Errorf("concurrent Migrate calls applied %q between them, want each of %q once", all, pending)
	}
}

func (s suite) pingAndDialect(t *testing.T) {
	t.Parallel()
	db := s.open(t)
	if err := db.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if d := db.Dialect(); d != store.DialectSQLite && d != store.DialectPostgres {
		t.Errorf("Dialect() = %q, want sqlite or postgres", d)
	}
}

func (s suite) inTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	insert := db.Rebind("INSERT INTO api_keys (id, name, prefix, hash, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)")
	count := func() int {
		t.Helper()
		var n int
		if err := db.InTx(ctx, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, "SELECT count(*) FROM api_keys").Scan(&n)
		}); err != nil {
			t.Fatalf("count: %v", err)
		}
		return n
	}

	errBoom := errors.New("boom")
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, "k1", "n", "p", "h1", "[]", 1); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("InTx returned %v, want fn's error", err)
	}
	if n := count(); n != 0 {
		t.Errorf("after a failed InTx, %d rows, want 0 (rolled back)", n)
	}

	func() {
		defer func() {
			if r := recover(); r != "panic in tx" {
				t.Errorf("recover() = %v, want the panic to continue", r)
			}
		}()
		_ = db.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, insert, "k2", "n", "p", "h2", "[]", 1); err != nil {
				return err
			}
			panic("panic in tx")
		})
	}()
	if n := count(); n != 0 {
		t.Errorf("after a panicking InTx, %d rows, want 0 (rolled back)", n)
	}

	err = db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insert, "k3", "n", "p", "h3", "[]", 1)
		return err
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	if n := count(); n != 1 {
		t.Errorf("after a committed InTx, %d rows, want 1", n)
	}
	if _, err := db.APIKeyByHash(ctx, "h3"); err != nil {
		t.Errorf("APIKeyByHash after commit: %v", err)
	}
}
