package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

const digestColumns = "id, user_id, channel, type, window_end, max_items, item_count, closed, notification_id, created_at"

// CreateDigested implements notify.DigestStore: the notification, its
// deliveries and its digest items in one transaction, group committed with
// other writes. (On PostgreSQL two batches joining the same digests in
// another order may deadlock; the group commit then runs each write alone.)
func (db *DB) CreateDigested(ctx context.Context, n notify.Notification, ds []notify.Delivery, joins []notify.DigestJoin) (notify.Notification, bool, error) {
	nArgs := notificationArgs(n)
	var (
		existing notify.Notification
		created  bool
	)
	err := db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		existing, created = notify.Notification{}, false // run again alone if its batch fails
		res, err := tx.ExecContext(ctx, db.Rebind(insertNotificationQuery), nArgs...)
		if err != nil {
			return err
		}
		// A notification of ours that is taken already had its digest
		// items go in with it.
		var inserted bool
		if existing, created, inserted, err = db.readInsert(ctx, tx, n, res); err != nil || !inserted {
			return err
		}
		if len(ds) > 0 {
			values, args := deliveryValues(ds, deliveryRow)
			if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO deliveries (`+deliveryColumns+`) VALUES `+values), args...); err != nil {
				return err
			}
		}
		for _, j := range joins {
			if err := db.joinDigest(ctx, tx, n, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return notify.Notification{}, false, mapErr(err, "create digested notification")
	}
	return existing, created, nil
}

// joinDigest adds n to its user's open digest on j.Channel, opening one
// when needed. The UPDATE takes the digest's row lock, so concurrent joins
// and a concurrent close are serialized on it and item_count stays exact; a
// concurrent open of the same window loses on the digests_open unique index
// (ON CONFLICT waits for the winner) and joins the winner's digest.
func (db *DB) joinDigest(ctx context.Context, tx *sql.Tx, n notify.Notification, j notify.DigestJoin) error {
	at := n.CreatedAt.UnixMicro()
	key := []any{n.UserID, string(j.Channel), n.Type}
	for range 3 {
		var (
			id  string
			seq int
		)
		err := tx.QueryRowContext(ctx, db.Rebind(`UPDATE digests SET item_count = item_count + 1,
			closed = CASE WHEN item_count + 1 >= max_items THEN 1 ELSE 0 END,
			window_end = CASE WHEN item_count + 1 >= max_items THEN ? ELSE window_end END
			WHERE user_id = ? AND channel = ? AND type = ? AND closed = 0 AND window_end > ?
			RETURNING id, item_count`), append(append([]any{at}, key...), at)...).Scan(&id, &seq)
		if err == nil {
			_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO digest_items (digest_id, seq, notification_id, data, created_at) VALUES (?, ?, ?, ?, ?)`),
				id, seq, n.ID, string(n.Data), at)
			return err
		}
		if !errNoRows(err) {
			return err
		}
		// No open digest takes it: close one whose window ended (the
		// scheduler sends it) and open a new window.
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE digests SET closed = 1
			WHERE user_id = ? AND channel = ? AND type = ? AND closed = 0 AND window_end <= ?`), append(key, at)...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO digests (id, user_id, channel, type, window_end, max_items, item_count, closed, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?) ON CONFLICT (user_id, channel, type) WHERE closed = 0 DO NOTHING`),
			j.NewID, n.UserID, string(j.Channel), n.Type, n.CreatedAt.Add(j.Window).UnixMicro(), j.MaxItems, at); err != nil {
			return err
		}
	}
	return apperr.New(apperr.Unavailable, "could not join a digest of %s on %s: too much contention", n.UserID, j.Channel)
}

// DueDigests implements notify.DigestStore.
func (db *DB) DueDigests(ctx context.Context, now time.Time, limit int) ([]notify.Digest, error) {
	rows, err := db.query(ctx, `SELECT `+digestColumns+` FROM digests WHERE notification_id IS NULL AND window_end <= ?
		ORDER BY window_end, id LIMIT ?`, now.UnixMicro(), limit)
	if err != nil {
		return nil, mapErr(err, "list due digests")
	}
	return appendRows(nil, rows, "list due digests", scanDigest)
}

// CloseDigest implements notify.DigestStore. The UPDATE waits for every
// join holding the row, so the items read after it are all there will be.
func (db *DB) CloseDigest(ctx context.Context, id string) (notify.Digest, error) {
	var d notify.Digest
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.Rebind(`UPDATE digests SET closed = 1 WHERE id = ?`), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return apperr.New(apperr.NotFound, "digest %q not found", id)
		}
		if d, err = scanDigest(tx.QueryRowContext(ctx, db.Rebind(`SELECT `+digestColumns+` FROM digests WHERE id = ?`), id)); err != nil {
			return err
		}
		d.Items, err = digestItems(ctx, func(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
			return tx.QueryContext(ctx, db.Rebind(q), args...)
		}, digestItemsQuery, id)
		return err
	})
	return d, mapErr(err, "close digest")
}

// MarkDigestSent implements notify.DigestStore.
func (db *DB) MarkDigestSent(ctx context.Context, id, notificationID string) error {
	_, err := db.exec(ctx, `UPDATE digests SET notification_id = ?, closed = 1 WHERE id = ? AND notification_id IS NULL`, notificationID, id)
	return mapErr(err, "mark digest sent")
}

// DigestsOf implements notify.DigestStore.
func (db *DB) DigestsOf(ctx context.Context, id string) ([]notify.Digest, error) {
	rows, err := db.query(ctx, `SELECT `+digestColumns+` FROM digests
		WHERE notification_id = ? OR id IN (SELECT digest_id FROM digest_items WHERE notification_id = ?) ORDER BY created_at, id`, id, id)
	if err != nil {
		return nil, mapErr(err, "list digests")
	}
	out, err := appendRows(nil, rows, "list digests", scanDigest)
	if err != nil {
		return nil, err
	}
	for i := range out {
		items, err := digestItems(ctx, db.query, digestItemsNoDataQuery, out[i].ID)
		if err != nil {
			return nil, mapErr(err, "list digest items")
		}
		out[i].Items = items
	}
	return out, nil
}

// digestItemsQuery reads a digest's items in the order they joined;
// digestItemsNoDataQuery leaves their data out (an empty object).
const (
	digestItemsQuery       = `SELECT notification_id, data, created_at FROM digest_items WHERE digest_id = ? ORDER BY seq`
	digestItemsNoDataQuery = `SELECT notification_id, '{}', created_at FROM digest_items WHERE digest_id = ? ORDER BY seq`
)

// digestItems reads digest id's items with q run by query (the read
// pool's, or a transaction's).
func digestItems(ctx context.Context, query func(ctx context.Context, q string, args ...any) (*sql.Rows, error), q, id string) ([]notify.DigestItem, error) {
	rows, err := query(ctx, q, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []notify.DigestItem
	for rows.Next() {
		var (
			it   notify.DigestItem
			data string
			at   int64
		)
		if err := rows.Scan(&it.NotificationID, &data, &at); err != nil {
			return nil, err
		}
		it.Data, it.At = []byte(data), fromMicros(&at)
		items = append(items, it)
	}
	return items, rows.Err()
}

func scanDigest(row interface{ Scan(...any) error }) (notify.Digest, error) {
	var (
		d                  notify.Digest
		ch                 string
		windowEnd, created int64
		closed             int
		notificationID     *string
	)
	if err := row.Scan(&d.ID, &d.UserID, &ch, &d.Type, &windowEnd, &d.MaxItems, &d.Count, &closed, &notificationID, &created); err != nil {
		return d, err
	}
	d.Channel, d.WindowEnd, d.CreatedAt, d.Closed = notify.Channel(ch), fromMicros(&windowEnd), fromMicros(&created), closed != 0
	if notificationID != nil {
		d.NotificationID = *notificationID
	}
	return d, nil
}

var _ notify.DigestStore = (*DB)(nil)

// templateRules is the stored JSON form of a template's rules column.
type templateRules struct {
	Digest     *notify.DigestRule     `json:"digest,omitempty"`
	Escalation *notify.EscalationRule `json:"escalation,omitempty"`
	TrackLinks bool                   `json:"track_links,omitempty"`
}

// encodeRules returns t's rules as stored: "" for none.
func encodeRules(t notify.Template) (string, error) {
	if t.Digest == nil && t.Escalation == nil && !t.TrackLinks {
		return "", nil
	}
	b, err := json.Marshal(templateRules{Digest: t.Digest, Escalation: t.Escalation, TrackLinks: t.TrackLinks})
	if err != nil {
		return "", fmt.Errorf("encode template rules: %w", err)
	}
	return string(b), nil
}

// decodeRules sets t's rules from their stored form.
func decodeRules(raw string, t *notify.Template) error {
	if raw == "" {
		return nil
	}
	var r templateRules
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return err
	}
	t.Digest, t.Escalation, t.TrackLinks = r.Digest, r.Escalation, r.TrackLinks
	return nil
}
