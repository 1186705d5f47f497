package store

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// onEachEngineThrough runs check in a parallel subtest per engine ("sqlite",
// "postgres") on a new store migrated through the migration named through
// (its file name without .sql), for tests of what a later migration does
// to rows stored before it.
func onEachEngineThrough(t *testing.T, through string, check func(t *testing.T, db *DB, engine string)) {
	t.Helper()
	engines := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "sluice.db") }},
		{"postgres", func(t *testing.T) string { return enginetest.PostgresSchema(t, enginetest.PostgresURL(t)) }},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db, err := Open(t.Context(), Options{URL: e.url(t), MaxOpenConns: 2})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if _, err := db.migrate(t.Context(), through); err != nil {
				t.Fatalf("migrate through %s: %v", through, err)
			}
			check(t, db, e.name)
		})
	}
}
