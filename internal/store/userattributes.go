package store

import (
	"context"
	"encoding/json"
	"time"
)

// The attributes feed workflow branches (user.<name>): *DB is the
// UserAttributes half of workflow.Profiles.
var _ interface {
	UserAttributes(ctx context.Context, user string) (json.RawMessage, error)
} = (*DB)(nil)

// PutUserAttributes replaces user's attributes, a JSON object (the caller
// validates it and bounds its size).
func (db *DB) PutUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) error {
	_, err := db.exec(ctx, `INSERT INTO user_attributes (user_id, attributes, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (user_id) DO UPDATE SET attributes = excluded.attributes, updated_at = excluded.updated_at`,
		user, string(attrs), now.UnixMicro())
	return mapErr(err, "put user attributes")
}

// UserAttributes returns user's attributes, {} when none are stored.
func (db *DB) UserAttributes(ctx context.Context, user string) (json.RawMessage, error) {
	var attrs string
	err := db.queryRow(ctx, `SELECT attributes FROM user_attributes WHERE user_id = ?`, user).Scan(&attrs)
	if errNoRows(err) {
		return json.RawMessage(`{}`), nil
	}
	if err != nil {
		return nil, mapErr(err, "get user attributes")
	}
	return json.RawMessage(attrs), nil
}
