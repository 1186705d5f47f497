package store

import (
	"context"
	"database/sql"
)

// QueryRowForTest runs q, unrebound, on the write connection (which sees
// every committed write at once), for tests measuring the store.
func (db *DB) QueryRowForTest(ctx context.Context, q string) *sql.Row {
	return db.write.QueryRowContext(ctx, q)
}
