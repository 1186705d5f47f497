package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/workflow"
)

// The bound on the users with attributes (workflow.Options.
// MaxAttributeUsers) needs these besides PutUserAttributes.
var _ workflow.AttributeStore = (*DB)(nil)

// ReplaceUserAttributes replaces user's attributes only if some are
// stored, and reports whether it did: a write that adds no row, for when
// the rows are at their bound.
func (db *DB) ReplaceUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) (bool, error) {
	res, err := db.exec(ctx, `UPDATE user_attributes SET attributes = ?, updated_at = ? WHERE user_id = ?`,
		string(attrs), now.UnixMicro(), user)
	if err != nil {
		return false, mapErr(err, "replace user attributes")
	}
	n, err := res.RowsAffected()
	return n > 0, mapErr(err, "replace user attributes")
}

// DeleteUserAttributes deletes user's attributes and reports whether
// there were any.
func (db *DB) DeleteUserAttributes(ctx context.Context, user string) (bool, error) {
	res, err := db.exec(ctx, `DELETE FROM user_attributes WHERE user_id = ?`, user)
	if err != nil {
		return false, mapErr(err, "delete user attributes")
	}
	n, err := res.RowsAffected()
	return n > 0, mapErr(err, "delete user attributes")
}

// CountUserAttributes counts the users with attributes stored: a read of
// the primary key's index, so the caller reads it on a timer, not per
// write.
func (db *DB) CountUserAttributes(ctx context.Context) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT count(*) FROM user_attributes`).Scan(&n)
	return n, mapErr(err, "count user attributes")
}
