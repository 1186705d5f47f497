package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// InboxTokenGeneration implements inbox.Store: user's current inbox token
// generation, 0 before any revocation.
func (db *DB) InboxTokenGeneration(ctx context.Context, user string) (int64, error) {
	var g int64
	err := db.queryRow(ctx, `SELECT generation FROM inbox_token_generations WHERE user_id = ?`, user).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, mapErr(err, "read inbox token generation")
}

// RevokeInboxTokens implements inbox.Store: it bumps user's inbox token
// generation at at and returns the new one. Concurrent revocations each
// bump it once.
func (db *DB) RevokeInboxTokens(ctx context.Context, user string, at time.Time) (int64, error) {
	var g int64
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, db.Rebind(`INSERT INTO inbox_token_generations (user_id, generation, revoked_at) VALUES (?, 1, ?)
		ON CONFLICT (user_id) DO UPDATE SET generation = inbox_token_generations.generation + 1, revoked_at = excluded.revoked_at
		RETURNING generation`), user, toMicros(at)).Scan(&g)
	})
	return g, mapErr(err, "revoke inbox tokens")
}
