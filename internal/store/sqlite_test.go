package store_test

import (
	"database/sql"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/store"
)

// TestSQLitePragmas pins the settings durability and concurrency rest on,
// as seen by the write connection.
func TestSQLitePragmas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openSQLite(t)
	want := map[string]string{
		"journal_mode": "wal",
		"synchronous":  "2", // FULL
		"foreign_keys": "1",
		"busy_timeout": "10000",
	}
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		for name, w := range want {
			var got string
			if err := tx.QueryRowContext(ctx, "PRAGMA "+name).Scan(&got); err != nil {
				return err
			}
			if got != w {
				t.Errorf("PRAGMA %s = %q, want %q", name, got, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
}

// TestPackageDocs fails when a package of the store has no doc comment.
func TestPackageDocs(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "storetest"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		documented := false
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			documented = documented || f.Doc != nil
		}
		if !documented {
			t.Errorf("package in %s has no doc comment", dir)
		}
	}
}

// BenchmarkAPIKeyByHash is the lookup every authenticated request makes.
func BenchmarkAPIKeyByHash(b *testing.B) {
	ctx := b.Context()
	db := mustOpen(b, store.Options{DataDir: b.TempDir()})
	if _, err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	_, k, err := auth.NewKey("bench", []auth.Scope{auth.ScopeAdmin}, time.Now(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := db.CreateAPIKey(ctx, k); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.APIKeyByHash(ctx, k.Hash); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
