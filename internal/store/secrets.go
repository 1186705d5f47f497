package store

import (
	"context"
	"time"
)

// Secret returns the server secret name, storing candidate first when there
// is none, so every node sharing the database agrees on it (the first to
// store wins). Callers pass a freshly generated random value as candidate.
func (db *DB) Secret(ctx context.Context, name, candidate string) (string, error) {
	_, err := db.exec(ctx, "INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
		name, candidate, time.Now().UnixMicro())
	if err != nil {
		return "", mapErr(err, "store server secret")
	}
	var v string
	err = db.write.QueryRowContext(ctx, db.Rebind("SELECT value FROM server_secrets WHERE name = ?"), name).Scan(&v)
	return v, mapErr(err, "read server secret")
}
