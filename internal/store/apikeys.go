package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

// apiKeyColumns is the column list every api_keys read selects, in
// scanAPIKey's order.
const apiKeyColumns = "id, name, prefix, hash, scopes, created_at, revoked_at"

// CreateAPIKey stores k. A zero CreatedAt is set to the store's clock; times
// are kept to the microsecond. It fails with apperr Conflict when a key with
// the same ID or Hash exists.
func (db *DB) CreateAPIKey(ctx context.Context, k auth.Key) error {
	if k.ID == "" || k.Hash == "" {
		return apperr.New(apperr.Invalid, "api key needs an id and a hash")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = db.now()
	}
	scopes := k.Scopes
	if scopes == nil {
		scopes = []auth.Scope{}
	}
	js, err := json.Marshal(scopes)
	if err != nil {
		return fmt.Errorf("encode scopes: %w", err)
	}
	return db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			k.ID, k.Name, k.Prefix, k.Hash, string(js), toMicros(k.CreatedAt), toMicros(k.RevokedAt)); err != nil {
			return mapErr(err, "create api key")
		}
		_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO api_keys_created (id, first_at) VALUES (1, ?)
			ON CONFLICT (id) DO NOTHING`), toMicros(k.CreatedAt))
		return mapErr(err, "mark an api key created")
	})
}

// APIKeyEverCreated reports whether any API key was ever created in this
// database, revoked since or not: the end of keyless mode for good.
func (db *DB) APIKeyEverCreated(ctx context.Context) (bool, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM api_keys_created`).Scan(&n)
	return n > 0, mapErr(err, "check whether an api key was created")
}

// APIKeyByHash returns the key whose Hash is hash, revoked or not (callers
// check Active). It fails with apperr NotFound when there is none.
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (auth.Key, error) {
	row := db.queryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = ?`, hash)
	k, err := scanAPIKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Key{}, apperr.New(apperr.NotFound, "api key not found")
	}
	if err != nil {
		return auth.Key{}, mapErr(err, "get api key")
	}
	return k, nil
}

// ListAPIKeys returns every key, revoked ones included, oldest first (ties
// broken by ID).
func (db *DB) ListAPIKeys(ctx context.Context) ([]auth.Key, error) {
	rows, err := db.query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, mapErr(err, "list api keys")
	}
	return appendRows([]auth.Key{}, rows, "list api keys", scanAPIKey)
}

// RevokeAPIKey marks key id revoked at the store's clock. Revoking a revoked
// key keeps its first revocation time and succeeds. It fails with apperr
// NotFound when there is no such key.
func (db *DB) RevokeAPIKey(ctx context.Context, id string) error {
	res, err := db.exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`,
		db.now().UnixMicro(), id)
	if err != nil {
		return mapErr(err, "revoke api key")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return mapErr(err, "revoke api key")
	}
	if n == 0 {
		return apperr.New(apperr.NotFound, "api key %q not found", id)
	}
	return nil
}

// CountActiveAPIKeys returns how many keys are not revoked. The HTTP edge
// uses it to decide whether to answer only loopback clients.
func (db *DB) CountActiveAPIKeys(ctx context.Context) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM api_keys WHERE revoked_at IS NULL`).Scan(&n)
	return n, mapErr(err, "count api keys")
}

// scanAPIKey reads one row selected with apiKeyColumns.
func scanAPIKey(row interface{ Scan(...any) error }) (auth.Key, error) {
	var (
		k       auth.Key
		scopes  string
		created int64
		revoked *int64
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Prefix, &k.Hash, &scopes, &created, &revoked); err != nil {
		return auth.Key{}, err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return auth.Key{}, fmt.Errorf("decode scopes of api key %q: %w", k.ID, err)
	}
	k.CreatedAt = fromMicros(&created)
	k.RevokedAt = fromMicros(revoked)
	return k, nil
}
