package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/audience"
)

var _ audience.Store = (*DB)(nil)

// Subscribe implements audience.Store in one transaction: the new
// subscriptions are inserted (the ones there already skipped by the
// primary key), the topic's count moves by as many, and the caps are
// checked against the topics' counts, so a call beyond them changes
// nothing. On PostgreSQL two concurrent calls may each pass the caps
// before the other commits: a cap may be passed by at most one call's
// users per concurrent call.
func (db *DB) Subscribe(ctx context.Context, topic string, users []string, now time.Time, maxTopics, maxSubs int64) (int, error) {
	var added int64
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var topics, subs int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*), CAST(coalesce(sum(subscribers), 0) AS BIGINT) FROM topics`).Scan(&topics, &subs); err != nil {
			return mapErr(err, "count topics")
		}
		var n int64
		err := tx.QueryRowContext(ctx, db.Rebind(`SELECT subscribers FROM topics WHERE key = ?`), topic).Scan(&n)
		switch {
		case errNoRows(err):
			if topics >= maxTopics {
				return apperr.New(apperr.TooMany, "this node keeps at most %d topics (notify.audiences.max_topics)", maxTopics)
			}
		case err != nil:
			return mapErr(err, "read topic")
		}
		args := make([]any, 0, 3*len(users))
		for _, u := range users {
			args = append(args, topic, u, now.UnixMicro())
		}
		res, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO topic_subscribers (topic, user_id, created_at) VALUES `+
			rowMarks(len(users), 3)+` ON CONFLICT DO NOTHING`), args...)
		if err != nil {
			return mapErr(err, "subscribe")
		}
		if added, err = res.RowsAffected(); err != nil {
			return mapErr(err, "subscribe")
		}
		if subs+added > maxSubs {
			return apperr.New(apperr.TooMany, "this node keeps at most %d topic subscriptions (notify.audiences.max_subscriptions)", maxSubs)
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO topics (key, subscribers, created_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET subscribers = topics.subscribers + excluded.subscribers`), topic, added, now.UnixMicro())
		return mapErr(err, "count subscribers")
	})
	return int(added), err
}

// rowMarks is n rows of cols placeholders each, for a multi-row VALUES.
func rowMarks(n, cols int) string {
	row := "(" + marks(cols) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// Unsubscribe implements audience.Store.
func (db *DB) Unsubscribe(ctx context.Context, topic, user string) (bool, error) {
	var gone bool
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM topic_subscribers WHERE topic = ? AND user_id = ?`), topic, user)
		if err != nil {
			return mapErr(err, "unsubscribe")
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return mapErr(err, "unsubscribe")
		}
		gone = true
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE topics SET subscribers = subscribers - 1 WHERE key = ?`), topic); err != nil {
			return mapErr(err, "count subscribers")
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`DELETE FROM topics WHERE key = ? AND subscribers <= 0`), topic)
		return mapErr(err, "remove topic")
	})
	return gone, err
}

// Subscribers implements audience.Store through the primary key.
func (db *DB) Subscribers(ctx context.Context, topic, after string, limit int) ([]string, error) {
	rows, err := db.query(ctx, `SELECT user_id FROM topic_subscribers WHERE topic = ? AND user_id > ? ORDER BY user_id LIMIT ?`,
		topic, after, limit)
	if err != nil {
		return nil, mapErr(err, "list subscribers")
	}
	return appendRows([]string{}, rows, "list subscribers", func(r rowScanner) (string, error) {
		var u string
		return u, r.Scan(&u)
	})
}

// Topics implements audience.Store.
func (db *DB) Topics(ctx context.Context) ([]audience.Topic, error) {
	rows, err := db.query(ctx, `SELECT key, subscribers, created_at FROM topics ORDER BY key`)
	if err != nil {
		return nil, mapErr(err, "list topics")
	}
	return appendRows([]audience.Topic{}, rows, "list topics", func(r rowScanner) (audience.Topic, error) {
		var (
			t  audience.Topic
			at int64
		)
		err := r.Scan(&t.Key, &t.Subscribers, &at)
		t.CreatedAt = fromMicros(&at)
		return t, err
	})
}
