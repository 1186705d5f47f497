package store_test

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openSQLite)
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	base := enginetest.PostgresURL(t)
	storetest.Run(t, func(t *testing.T) *store.DB { return openPostgres(t, enginetest.PostgresSchema(t, base)) })
}

// openSQLite opens a store in a fresh data dir.
func openSQLite(t *testing.T) *store.DB {
	t.Helper()
	return mustOpen(t, store.Options{DataDir: filepath.Join(t.TempDir(), "data")})
}

func mustOpen(t testing.TB, opts store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func openPostgres(t *testing.T, url string) *store.DB {
	t.Helper()
	return mustOpen(t, store.Options{URL: url, MaxOpenConns: 4})
}

// TestSQLiteReopen writes, closes and reopens the file, as a restart would.
func TestSQLiteReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "nested", "data")
	db, err := store.Open(ctx, store.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	_, k, err := auth.NewKey("durable", []auth.Scope{auth.ScopeAdmin}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir = %v, %v; want mode 0700", fi.Mode(), err)
	}

	db = mustOpen(t, store.Options{URL: "sqlite:" + filepath.Join(dir, "sluice.db")})
	if pending, err := db.PendingMigrations(ctx); err != nil || len(pending) != 0 {
		t.Errorf("PendingMigrations after reopen = %q, %v; want none", pending, err)
	}
	got, err := db.APIKeyByHash(ctx, k.Hash)
	if err != nil || got.ID != k.ID {
		t.Errorf("APIKeyByHash after reopen = %+v, %v; want key %s", got, err, k.ID)
	}
}

// TestSQLiteTwoHandles migrates and writes through two *DB on one file, as
// two processes would: the write lock, not database/sql, keeps them apart.
func TestSQLiteTwoHandles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	a := mustOpen(t, store.Options{URL: "file:" + path})
	b := mustOpen(t, store.Options{URL: "file:" + path})
	twoHandles(t, a, b)
}

// TestPostgresTwoHandles is the same on PostgreSQL: two pools on one schema.
func TestPostgresTwoHandles(t *testing.T) {
	t.Parallel()
	u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	twoHandles(t, openPostgres(t, u), openPostgres(t, u))
}

func twoHandles(t *testing.T, a, b *store.DB) {
	t.Helper()
	ctx := t.Context()
	want, err := a.PendingMigrations(ctx)
	if err != nil {
		t.Fatalf("PendingMigrations: %v", err)
	}
	var (
		wg      sync.WaitGroup
		applied [2][]string
	)
	for i, db := range []*store.DB{a, b} {
		wg.Go(func() {
			var err error
			if applied[i], err = db.Migrate(ctx); err != nil {
				t.Errorf("Migrate on handle %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := slices.Sorted(slices.Values(append(applied[0], applied[1]...))); !slices.Equal(got, want) {
		t.Errorf("two handles applied %q and %q, want each of %q once", applied[0], applied[1], want)
	}
	pending, err := a.PendingMigrations(ctx)
	if err != nil || len(pending) != 0 {
		t.Errorf("PendingMigrations = %q, %v; want none", pending, err)
	}
	for i := range 20 {
		db := []*store.DB{a, b}[i%2]
		wg.Go(func() {
			_, k, err := auth.NewKey("k", nil, time.Now(), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if err := db.CreateAPIKey(ctx, k); err != nil {
				t.Errorf("CreateAPIKey through handle %d: %v", i%2, err)
			}
		})
	}
	wg.Wait()
	if n, err := b.CountActiveAPIKeys(ctx); err != nil || n != 20 {
		t.Errorf("CountActiveAPIKeys = %d, %v; want 20", n, err)
	}
}

func TestPostgresDown(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1; the connection is refused at once.
	_, err := store.Open(t.Context(), store.Options{URL: "postgres://sluice:secret@127.0.0.1:1/sluice?connect_timeout=5"})
	if !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("Open(refused) = %v, want apperr Unavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("Open error %q shows the password", err)
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	t.Parallel()
	db, err := store.Open(t.Context(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(t.Context()); !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("Ping after Close = %v, want apperr Unavailable", err)
	}
	if _, err := db.ListAPIKeys(t.Context()); !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("ListAPIKeys after Close = %v, want apperr Unavailable", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, url, dataDir string }{
		{"nothing set", "", ""},
		{"unknown scheme", "mysql://localhost/db", ""},
		{"no scheme", "localhost", "/tmp"},
		{"postgres without slashes", "postgres:localhost", ""},
		{"sqlite in memory", "sqlite::memory:", ""},
		{"sqlite with parameters", "sqlite:/tmp/x.db?_pragma=foo", ""},
		{"sqlite without path", "sqlite:", ""},
		{"bad postgres parameter", "postgres://u:hunter2@127.0.0.1/db?sslmode=bogus", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := store.Open(t.Context(), store.Options{URL: tt.url, DataDir: tt.dataDir})
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q, %q) succeeded, want an error", tt.url, tt.dataDir)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("Open(%q) error %q shows the password", tt.url, err)
			}
			if !apperr.Is(err, apperr.Invalid) {
				t.Errorf("Open(%q, %q) = %v, want apperr Invalid", tt.url, tt.dataDir, err)
			}
		})
	}
}

// TestPostgresConnectionsDropped kills the store's server connections, as a
// failover or restart would: an error then must say Unavailable, and the
// store must reconnect by itself.
func TestPostgresConnectionsDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u, err := url.Parse(enginetest.PostgresSchema(t, enginetest.PostgresURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	app := "sluice_store_test_" + filepath.Base(t.TempDir())
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	db := openPostgres(t, u.String())
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}

	admin, err := sql.Open("pgx", enginetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed int
	err = admin.QueryRowContext(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed)
	if err != nil || killed == 0 {
		t.Fatalf("terminate the store's connections: killed %d, %v", killed, err)
	}

	if _, err := db.ListAPIKeys(ctx); err != nil && !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("ListAPIKeys on a dropped connection = %v, want success or apperr Unavailable", err)
	}
	if _, err := db.ListAPIKeys(ctx); err != nil {
		t.Errorf("ListAPIKeys after reconnecting = %v, want success", err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping after reconnecting = %v", err)
	}
}
