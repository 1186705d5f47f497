package store

import (
	"context"

	"github.com/sluicehq/sluice/internal/notify"
)

const (
	outboxColumns = `notification_id, channel, attempt, user_id, recipient, subject, body, created_at, html`
	// insertOutboxQuery adds an outbox entry unless that attempt has one.
	insertOutboxQuery = `INSERT INTO outbox (` + outboxColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
)

// outboxArgs returns e's values for outboxColumns.
func outboxArgs(e *notify.OutboxEntry) []any {
	return []any{e.NotificationID, string(e.Channel), e.Attempt, e.UserID, e.To, e.Subject, e.Body, toMicros(e.CreatedAt), e.HTML}
}

// OutboxEntries implements notify.Store. The cursor's ID is the last
// entry's notify.OutboxEntry.CursorID: "notification_id:channel:attempt".
func (db *DB) OutboxEntries(ctx context.Context, f notify.OutboxFilter, after notify.Cursor, limit int) ([]notify.OutboxEntry, error) {
	q := `SELECT ` + outboxColumns + ` FROM outbox WHERE 1 = 1`
	var args []any
	if f.UserID != "" {
		// An entry's user is its notification's: the user's notifications
		// (an index on notifications) narrow the search, so outbox rows
		// need no index by user, which would cost a random page write
		// per entry.
		q += ` AND notification_id IN (SELECT id FROM notifications WHERE user_id = ?) AND user_id = ?`
		args = append(args, f.UserID, f.UserID)
	}
	if f.NotificationID != "" {
		q += ` AND notification_id = ?`
		args = append(args, f.NotificationID)
	}
	if !after.IsZero() {
		q += ` AND (created_at < ? OR (created_at = ? AND notification_id || ':' || channel || ':' || CAST(attempt AS TEXT) < ?))`
		args = append(args, after.At.UnixMicro(), after.At.UnixMicro(), after.ID)
	}
	q += ` ORDER BY created_at DESC, notification_id || ':' || channel || ':' || CAST(attempt AS TEXT) DESC LIMIT ?`
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
