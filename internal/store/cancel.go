package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// cancelDeliveriesUpdate cancels the deliveries of one notification that
// no worker holds: queued ones (due now, or waiting for a retry or the end
// of quiet hours). The claim (claimDeliveryUpdate) and the outcome of an
// unclaimed attempt (finishAttemptUpdate) apply only to a queued delivery,
// so whichever of a cancel and a claim reaches the row first decides it,
// and the other changes nothing. On PostgreSQL a row another transaction
// is changing is re-checked once that commits, so the condition holds.
const cancelDeliveriesUpdate = `UPDATE deliveries SET status = 'canceled', next_attempt_at = NULL, updated_at = ?
	WHERE notification_id = ? AND status = 'queued' RETURNING channel`

// CancelDeliveries implements notify.Store, group-committed.
func (db *DB) CancelDeliveries(ctx context.Context, id string, at time.Time) ([]notify.Channel, error) {
	exists := db.Rebind(`SELECT 1 FROM notifications WHERE id = ?`)
	update := db.Rebind(cancelDeliveriesUpdate)
	var canceled []notify.Channel
	found := false
	err := db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		canceled, found = nil, false
		var one int
		if err := tx.QueryRowContext(ctx, exists, id).Scan(&one); err != nil {
			if errNoRows(err) {
				return nil
			}
			return err
		}
		found = true
		rows, err := tx.QueryContext(ctx, update, at.UnixMicro(), id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ch string
			if err := rows.Scan(&ch); err != nil {
				return err
			}
			canceled = append(canceled, notify.Channel(ch))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "cancel deliveries")
	}
	if !found {
		return nil, apperr.New(apperr.NotFound, "notification %s not found", id)
	}
	return canceled, nil
}
