package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// RecordReceipt implements notify.Store: only a sent delivery moves.
func (db *DB) RecordReceipt(ctx context.Context, key notify.DeliveryKey, status notify.Status, errMsg string, at time.Time) (bool, error) {
	res, err := db.exec(ctx, `UPDATE deliveries SET status = ?, error = ?, updated_at = ?
		WHERE notification_id = ? AND channel = ? AND status = 'sent'`,
		string(status), errMsg, toMicros(at), key.NotificationID, string(key.Channel))
	if err != nil {
		return false, mapErr(err, "record receipt")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, mapErr(err, "record receipt")
	}
	if n > 0 {
		return true, nil
	}
	if _, err := db.Delivery(ctx, key); err != nil {
		return false, err
	}
	return false, nil
}

// encodeHops stores a delivery's hops as a JSON array, or an empty string for none.
func encodeHops(hops []notify.Hop) (string, error) {
	if len(hops) == 0 {
		return "", nil
	}
	b, err := json.Marshal(hops)
	if err != nil {
		return "", apperr.Wrap(apperr.Internal, err, "encode hops")
	}
	return string(b), nil
}
