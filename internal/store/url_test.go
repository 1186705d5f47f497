package store

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, dataDir string
		want               target
	}{
		{"default file in data dir", "", "data", target{dialect: DialectSQLite, path: filepath.Join("data", "sluice.db"), dataDir: "data"}},
		{"postgres", "postgres://u:p@h:5432/db?sslmode=disable", "ignored", target{dialect: DialectPostgres, url: "postgres://u:p@h:5432/db?sslmode=disable"}},
		{"postgresql", "postgresql://h/db", "", target{dialect: DialectPostgres, url: "postgresql://h/db"}},
		{"scheme case", "POSTGRES://h/db", "", target{dialect: DialectPostgres, url: "POSTGRES://h/db"}},
		{"sqlite absolute", "sqlite:/var/lib/sluice/x.db", "", target{dialect: DialectSQLite, path: "/var/lib/sluice/x.db"}},
		{"sqlite triple slash", "sqlite:///var/lib/x.db", "", target{dialect: DialectSQLite, path: "/var/lib/x.db"}},
		{"sqlite localhost", "sqlite://localhost/var/lib/x.db", "", target{dialect: DialectSQLite, path: "/var/lib/x.db"}},
		{"sqlite relative", "sqlite:data/x.db", "", target{dialect: DialectSQLite, path: "data/x.db"}},
		{"sqlite double slash relative", "sqlite://data/x.db", "", target{dialect: DialectSQLite, path: "data/x.db"}},
		{"file relative", "file:x.db", "", target{dialect: DialectSQLite, path: "x.db"}},
		{"file absolute", "file:///tmp/x.db", "", target{dialect: DialectSQLite, path: "/tmp/x.db"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseTarget(tt.url, tt.dataDir)
			if err != nil || got != tt.want {
				t.Errorf("parseTarget(%q, %q) = %+v, %v; want %+v", tt.url, tt.dataDir, got, err, tt.want)
			}
		})
	}
}

func TestParseTargetHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"mysql://root:hunter2@h/db", "postgres:hunter2@h"} {
		if _, err := parseTarget(u, ""); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("parseTarget(%q) error = %v, want an error without the password", u, err)
		}
	}
}

// FuzzParseTarget checks that any URL from a flag, environment variable or
// config file either fails cleanly or names a target Open can use.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"", "postgres://h/db", "sqlite:///a/b.db", "file:x.db", "sqlite://localhost/", "sqlite::memory:", "a:b:c", "sqlite:?x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		got, err := parseTarget(u, "data")
		if err != nil {
			return
		}
		switch got.dialect {
		case DialectPostgres:
			if got.url != u || got.path != "" {
				t.Errorf("parseTarget(%q) = %+v, want the URL passed through", u, got)
			}
		case DialectSQLite:
			if got.path == "" || strings.ContainsAny(got.path, "?\x00") || got.path == ":memory:" {
				t.Errorf("parseTarget(%q) = %+v, want a usable file path", u, got)
			}
		default:
			t.Errorf("parseTarget(%q) dialect = %q", u, got.dialect)
		}
	})
}
