package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.ConversionStore = (*DB)(nil)

// RecordConversion implements shorten.ConversionStore: an INSERT ...
// SELECT from the link (so a deleted link records nothing) while the click
// id has fewer than shorten.MaxClickEvents events, ON CONFLICT DO NOTHING
// on (click_id, event), and the link's counter, in one transaction. A
// repeat reads back the conversion first stored.
func (db *DB) RecordConversion(ctx context.Context, c shorten.Conversion) (shorten.Conversion, bool, error) {
	created := false
	var out shorten.Conversion
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		// A new event name on a click id that has MaxClickEvents already
		// inserts nothing (the read below then says which case it was).
		res, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO link_conversions (click_id, event, link_id, notification_id, value, at)
			SELECT ?, ?, id, notification_id, ?, ? FROM links
			WHERE id = ? AND (SELECT COUNT(*) FROM link_conversions WHERE click_id = ?) < ?
			ON CONFLICT (click_id, event) DO NOTHING`), c.ClickID, c.Event, c.Value, c.At.UnixMicro(), c.LinkID,
			c.ClickID, shorten.MaxClickEvents)
		if err != nil {
			return mapErr(err, "record conversion")
		}
		if n, err := res.RowsAffected(); err != nil {
			return mapErr(err, "record conversion")
		} else if n == 1 {
			created = true
			if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE links SET conversions = conversions + 1 WHERE id = ?`), c.LinkID); err != nil {
				return mapErr(err, "count conversion")
			}
		}
		var (
			notif *string
			at    int64
		)
		err = tx.QueryRowContext(ctx, db.Rebind(`SELECT link_id, notification_id, value, at FROM link_conversions
			WHERE click_id = ? AND event = ?`), c.ClickID, c.Event).Scan(&out.LinkID, &notif, &out.Value, &at)
		if errors.Is(err, sql.ErrNoRows) {
			var n int
			if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT COUNT(*) FROM link_conversions WHERE click_id = ?`),
				c.ClickID).Scan(&n); err != nil {
				return mapErr(err, "count click conversions")
			}
			if n >= shorten.MaxClickEvents {
				return apperr.New(apperr.Conflict, "this click id has conversions of %d events already, the most it may have", n)
			}
			return apperr.New(apperr.NotFound, "link %d not found", c.LinkID)
		}
		if err != nil {
			return mapErr(err, "read conversion")
		}
		out.ClickID, out.Event, out.At = c.ClickID, c.Event, fromMicros(&at)
		if notif != nil {
			out.NotificationID = *notif
		}
		return nil
	})
	if err != nil {
		return shorten.Conversion{}, false, err
	}
	return out, created, nil
}

// NotificationConversions implements shorten.ConversionStore
// (link_conversions_notification serves it).
func (db *DB) NotificationConversions(ctx context.Context, notificationID string) (shorten.ConversionTotal, error) {
	var t shorten.ConversionTotal
	err := db.queryRow(ctx, `SELECT COUNT(*), COALESCE(SUM(value), 0) FROM link_conversions WHERE notification_id = ?`,
		notificationID).Scan(&t.Count, &t.Value)
	return t, mapErr(err, "notification conversions")
}

// LinkByID implements shorten.ConversionStore.
func (db *DB) LinkByID(ctx context.Context, id int64) (shorten.Link, error) {
	l, err := scanLink(db.queryRow(ctx, `SELECT `+linkColumns+` FROM links WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return shorten.Link{}, apperr.New(apperr.NotFound, "link %d not found", id)
	}
	return l, mapErr(err, "get link by id")
}
