package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Dialect names returned by [DB.Dialect].
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// dbFileName is the SQLite file Open uses inside Options.DataDir.
const dbFileName = "sluice.db"

// target is what Open connects to, worked out from Options alone.
type target struct {
	dialect string
	path    string // SQLite file path
	url     string // PostgreSQL URL, passed to pgx unchanged
	dataDir string // created 0700 when non-empty
}

// parseTarget turns Options.URL (and DataDir when URL is empty) into a
// target. Errors never repeat the URL, which may carry a password.
//
// Accepted forms:
//
//	""                                  <dataDir>/sluice.db
//	postgres://... or postgresql://...  PostgreSQL, any pgx URL parameters
//	sqlite:/abs/path.db, sqlite:///abs/path.db, sqlite:rel/path.db
//	file:/abs/path.db, file:///abs/path.db, file:rel/path.db
func parseTarget(rawURL, dataDir string) (target, error) {
	if rawURL == "" {
		if dataDir == "" {
			return target{}, errors.New("neither a database url nor a data dir is set")
		}
		return target{dialect: DialectSQLite, path: filepath.Join(dataDir, dbFileName), dataDir: dataDir}, nil
	}
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok {
		return target{}, errors.New("database url has no scheme (want postgres://, sqlite: or file:)")
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if !strings.HasPrefix(rest, "//") {
			return target{}, fmt.Errorf("database url: %s: must start with %s://", scheme, scheme)
		}
		return target{dialect: DialectPostgres, url: rawURL}, nil
	case "sqlite", "sqlite3", "file":
		path, err := sqlitePath(rest)
		if err != nil {
			return target{}, fmt.Errorf("database url: %s: %w", scheme, err)
		}
		return target{dialect: DialectSQLite, path: path}, nil
	default:
		return target{}, fmt.Errorf("database url: unsupported scheme %q (want postgres://, sqlite: or file:)", scheme)
	}
}

// sqlitePath returns the file path named after a sqlite: or file: scheme.
func sqlitePath(rest string) (string, error) {
	if strings.HasPrefix(rest, "//") {
		// sqlite:///abs/path has an empty authority; sqlite://localhost/abs too.
		host, path, _ := strings.Cut(rest[2:], "/")
		switch host {
		case "", "localhost":
			rest = "/" + path
		default:
			// sqlite://rel/path.db: treat the authority as the path's start,
			// which is what people mean by it.
			rest = rest[2:]
		}
	}
	switch {
	case rest == "" || rest == "/":
		return "", errors.New("no file path")
	case strings.ContainsAny(rest, "?#"):
		return "", errors.New("query parameters are not supported; Sluice sets the SQLite options itself")
	case rest == ":memory:" || strings.HasPrefix(rest, ":memory:"):
		return "", errors.New("in-memory databases are not supported; name a file")
	case strings.ContainsRune(rest, 0):
		return "", errors.New("file path contains a NUL byte")
	}
	return filepath.Clean(rest), nil
}
