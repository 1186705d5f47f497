package storetest

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/store"
)

// SQLite opens a store on SQLite in a fresh data directory, with every
// migration applied, closed when t ends.
func SQLite(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}
