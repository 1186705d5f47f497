package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

var _ notify.EmailLinkStore = (*DB)(nil)

const emailLinkCols = `token, notification_id, url, sent_at, hits, bot_hits, first_at`

// PutEmailLinks implements notify.EmailLinkStore: one row per
// notification and URL, whose sent_at moves to the new one's on every
// attempt. A message's links go in one write of the group commit, so one
// commit serves the links of every message being sent at that moment.
func (db *DB) PutEmailLinks(ctx context.Context, links []notify.EmailLink) ([]notify.EmailLink, error) {
	out := make([]notify.EmailLink, len(links))
	q := db.Rebind(`INSERT INTO email_links (token, notification_id, url, sent_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (notification_id, url) DO UPDATE SET sent_at = excluded.sent_at
		RETURNING ` + emailLinkCols)
	err := db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i, l := range links { // a rerun (the batch failed) overwrites out
			var err error
			if out[i], err = scanEmailLink(tx.QueryRowContext(ctx, q, l.Token, l.NotificationID, l.URL, toMicros(l.SentAt))); err != nil {
				return err
			}
		}
		return nil
	})
	return out, mapErr(err, "put email links")
}

// EmailLink implements notify.EmailLinkStore.
func (db *DB) EmailLink(ctx context.Context, token string) (notify.EmailLink, error) {
	l, err := scanEmailLink(db.queryRow(ctx, `SELECT `+emailLinkCols+` FROM email_links WHERE token = ?`, token))
	if errors.Is(err, sql.ErrNoRows) {
		return l, apperr.New(apperr.NotFound, "tracked link not found")
	}
	return l, mapErr(err, "read email link")
}

// RecordEmailHit implements notify.EmailLinkStore.
func (db *DB) RecordEmailHit(ctx context.Context, token string, bot bool, reason string, at time.Time) error {
	q := `UPDATE email_links SET hits = hits + 1, first_at = COALESCE(first_at, ?) WHERE token = ?`
	args := []any{toMicros(at), token}
	if bot {
		q = `UPDATE email_links SET bot_hits = bot_hits + 1, last_bot_reason = ? WHERE token = ?`
		args = []any{reason, token}
	}
	_, err := db.exec(ctx, q, args...)
	return mapErr(err, "record email link hit")
}

// EmailLinks implements notify.EmailLinkStore, by URL (the pixel first).
func (db *DB) EmailLinks(ctx context.Context, notificationID string) ([]notify.EmailLink, error) {
	rows, err := db.query(ctx, `SELECT `+emailLinkCols+` FROM email_links WHERE notification_id = ? ORDER BY url`, notificationID)
	if err != nil {
		return nil, mapErr(err, "list email links")
	}
	return appendRows(nil, rows, "list email links", scanEmailLink)
}

func scanEmailLink(row interface{ Scan(...any) error }) (notify.EmailLink, error) {
	var (
		l     notify.EmailLink
		sent  int64
		first *int64
	)
	if err := row.Scan(&l.Token, &l.NotificationID, &l.URL, &sent, &l.Hits, &l.BotHits, &first); err != nil {
		return notify.EmailLink{}, err
	}
	l.SentAt, l.FirstAt = fromMicros(&sent), fromMicros(first)
	return l, nil
}
