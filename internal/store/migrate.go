package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// migration is one numbered schema change for one dialect.
type migration struct {
	name string // file name without .sql, e.g. "0001_api_keys"
	sql  string
}

// migrationName is the required file name: a number, an underscore, a name.
var migrationName = regexp.MustCompile(`^[0-9]{4}_[a-z0-9_]+\.sql$`)

// migrationsFor returns dialect's migrations in the order they apply.
func migrationsFor(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name
		if !migrationName.MatchString(e.Name()) {
			return nil, fmt.Errorf("migration %s/%s: name must look like 0001_name.sql", dir, e.Name())
		}
		b, err := fs.ReadFile(migrationFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration: %w", err)
		}
		ms = append(ms, migration{name: strings.TrimSuffix(e.Name(), ".sql"), sql: string(b)})
	}
	return ms, nil
}

// createMigrationsTable is valid on both engines.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	name       TEXT PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, in order, each in its own transaction together with
// its schema_migrations row, and returns the names it applied (empty when
// the schema is current). Running it again is a no-op.
//
// It is safe for several processes to migrate one database at once: every
// transaction first takes a lock and then re-checks what is applied, so each
// migration runs exactly once. On PostgreSQL the lock is a transaction-scoped
// advisory lock keyed by the current schema; on SQLite it is the database
// write lock that BEGIN IMMEDIATE takes.
func (db *DB) Migrate(ctx context.Context) (applied []string, err error) {
	return db.migrate(ctx, "")
}

// migrate is Migrate, stopping after the migration named through when it
// is not empty (tests use it to check what a migration does to old rows).
func (db *DB) migrate(ctx context.Context, through string) (applied []string, err error) {
	ms, err := migrationsFor(db.dialect)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(ms, func(m migration) bool { return m.name == through }); i >= 0 {
		ms = ms[:i+1]
	}
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		if err := db.lockMigrations(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, createMigrationsTable)
		return mapErr(err, "create schema_migrations")
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		var ran bool
		err := db.InTx(ctx, func(tx *sql.Tx) error {
			if err := db.lockMigrations(ctx, tx); err != nil {
				return err
			}
			var n int
			err := tx.QueryRowContext(ctx, db.Rebind("SELECT count(*) FROM schema_migrations WHERE name = ?"), m.name).Scan(&n)
			if err != nil || n > 0 {
				return mapErr(err, "read schema_migrations")
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return mapErr(err, "apply "+m.name)
			}
			_, err = tx.ExecContext(ctx, db.Rebind("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)"),
				m.name, db.now().UnixMicro())
			ran = true
			return mapErr(err, "record "+m.name)
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
		if ran {
			applied = append(applied, m.name)
			db.log.Info("applied migration", slog.String(logKeyMigration, m.name), slog.String(logKeyDialect, db.dialect))
		}
	}
	return applied, nil
}

// lockMigrations serialises migrating transactions across processes. On
// PostgreSQL it first lifts statement_timeout for the transaction (SET
// LOCAL, whatever Options or the URL set): a migration may rewrite a large
// table, and a node waits here for another node's migration to finish; cut
// short, it would fail the node's start every time.
func (db *DB) lockMigrations(ctx context.Context, tx *sql.Tx) error {
	if db.dialect != DialectPostgres {
		return nil // BEGIN IMMEDIATE already holds the write lock
	}
	if err := setLocalStatementTimeout(ctx, tx, 0); err != nil {
		return err
	}
	// The first key is fixed (0x736c7569, "slui"); the second keeps tests
	// in separate schemas of one database from waiting on each other.
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(1936487785, hashtext(current_schema()))")
	return mapErr(err, "lock migrations")
}

// PendingMigrations returns the names of the embedded migrations not yet
// applied, in the order Migrate would apply them. It changes nothing.
func (db *DB) PendingMigrations(ctx context.Context) ([]string, error) {
	ms, err := migrationsFor(db.dialect)
	if err != nil {
		return nil, err
	}
	done, err := db.appliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	var pending []string
	for _, m := range ms {
		if !slices.Contains(done, m.name) {
			pending = append(pending, m.name)
		}
	}
	return pending, nil
}

// appliedMigrations lists schema_migrations, or nothing when the table does
// not exist yet.
func (db *DB) appliedMigrations(ctx context.Context) ([]string, error) {
	exists := "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"
	if db.dialect == DialectPostgres {
		exists = "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations'"
	}
	var n int
	if err := db.queryRow(ctx, exists).Scan(&n); err != nil {
		return nil, mapErr(err, "find schema_migrations")
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := db.query(ctx, "SELECT name FROM schema_migrations ORDER BY name")
	if err != nil {
		return nil, mapErr(err, "read schema_migrations")
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, mapErr(err, "read schema_migrations")
		}
		names = append(names, name)
	}
	return names, mapErr(rows.Err(), "read schema_migrations")
}
