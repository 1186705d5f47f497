package store

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestCodeKeySurvivesOneSecretTable checks migration 0008 on both engines:
// a link code key stored in link_settings before it is the server secret
// code_key after it, so upgraded nodes keep permuting codes with the key
// their links were made with.
func TestCodeKeySurvivesOneSecretTable(t *testing.T) {
	t.Parallel()
	engines := []struct {
		name string
		open func(t *testing.T) *DB
	}{
		{"sqlite", func(t *testing.T) *DB {
			db, err := Open(t.Context(), Options{DataDir: filepath.Join(t.TempDir(), "data")})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		}},
		{"postgres", func(t *testing.T) *DB {
			db, err := Open(t.Context(), Options{URL: enginetest.PostgresSchema(t, enginetest.PostgresURL(t)), MaxOpenConns: 2})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		}},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := e.open(t)
			if _, err := db.migrate(ctx, "0007_without_rowid"); err != nil {
				t.Fatalf("migrate through 0007: %v", err)
			}
			if _, err := db.exec(ctx, "INSERT INTO link_settings (name, value) VALUES ('code_key', 'old-key')"); err != nil {
				t.Fatal(err)
			}
			applied, err := db.Migrate(ctx)
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if len(applied) == 0 || applied[0] != "0008_one_secret_table" {
				t.Errorf("Migrate applied %v, want 0008_one_secret_table first", applied)
			}
			if v, err := db.Secret(ctx, "code_key", "new-key"); err != nil || v != "old-key" {
				t.Errorf("Secret(code_key) = %q, %v; want the key stored before the migration, old-key", v, err)
			}
			if _, err := db.exec(ctx, "SELECT 1 FROM link_settings"); err == nil {
				t.Error("link_settings still exists after 0008")
			}
		})
	}
}
