package store

import (
	"context"

	"github.com/sluicehq/sluice/internal/notify"
)

// The built-in outbox's entry lives in the delivery it was sent for
// (migration 0027): the worker stores one only with a sent outcome, whose
// update rewrites the delivery's row anyway.
const outboxColumns = `notification_id, channel, outbox_attempt, user_id, outbox_to, outbox_subject, outbox_body, outbox_at, outbox_html`

// outboxArgs returns e's values for finishAttemptUpdate's outbox columns:
// attempt, recipient, subject, body, HTML and time, or NULLs for no entry,
// which keep the delivery's.
func outboxArgs(e *notify.OutboxEntry) []any {
	if e == nil {
		return []any{nil, nil, nil, nil, nil, nil}
	}
	return []any{e.Attempt, e.To, e.Subject, e.Body, e.HTML, toMicros(e.CreatedAt)}
}

// OutboxEntries implements notify.Store. The cursor's ID is the last
// entry's notify.OutboxEntry.CursorID: "notification_id:channel:attempt".
// The deliveries_outbox index holds the deliveries that have an entry, by
// time.
func (db *DB) OutboxEntries(ctx context.Context, f notify.OutboxFilter, after notify.Cursor, limit int) ([]notify.OutboxEntry, error) {
	q := `SELECT ` + outboxColumns + ` FROM deliveries WHERE outbox_at IS NOT NULL`
	var args []any
	if f.UserID != "" {
		// An entry's user is its notification's: the user's notifications
		// (an index on notifications) narrow the search, so deliveries
		// need no index by user, which would cost a random page write
		// per delivery.
		q += ` AND notification_id IN (SELECT id FROM notifications WHERE user_id = ?) AND user_id = ?`
		args = append(args, f.UserID, f.UserID)
	}
	if f.NotificationID != "" {
		q += ` AND notification_id = ?`
		args = append(args, f.NotificationID)
	}
	if !after.IsZero() {
		q += ` AND (outbox_at < ? OR (outbox_at = ? AND notification_id || ':' || channel || ':' || CAST(outbox_attempt AS TEXT) < ?))`
		args = append(args, after.At.UnixMicro(), after.At.UnixMicro(), after.ID)
	}
	q += ` ORDER BY outbox_at DESC, notification_id || ':' || channel || ':' || CAST(outbox_attempt AS TEXT) DESC LIMIT ?`
	rows, err := db.query(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, mapErr(err, "list outbox")
	}
	defer rows.Close()
	out := []notify.OutboxEntry{}
	for rows.Next() {
		var (
			e       notify.OutboxEntry
			ch      string
			created int64
		)
		if err := rows.Scan(&e.NotificationID, &ch, &e.Attempt, &e.UserID, &e.To, &e.Subject, &e.Body, &created, &e.HTML); err != nil {
			return nil, mapErr(err, "list outbox")
		}
		e.Channel, e.CreatedAt = notify.Channel(ch), fromMicros(&created)
		out = append(out, e)
	}
	return out, mapErr(rows.Err(), "list outbox")
}
