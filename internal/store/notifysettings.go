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

// settingsDoc is the stored JSON form of notify.Settings.
type settingsDoc struct {
	Channels   map[notify.Channel]bool  `json:"channels"`
	Categories map[notify.Category]bool `json:"categories"`
	Contacts   notify.Contacts          `json:"contacts"`
	Locale     string                   `json:"locale"`
	Timezone   string                   `json:"timezone,omitempty"`
	QuietHours notify.QuietHours        `json:"quiet_hours"`
}

// Settings implements notify.Store.
func (db *DB) Settings(ctx context.Context, user string) (notify.Settings, bool, error) {
	var (
		raw     string
		updated int64
	)
	err := db.queryRow(ctx, `SELECT settings, updated_at FROM notification_settings WHERE user_id = ?`, user).Scan(&raw, &updated)
	if errNoRows(err) {
		return notify.Settings{}, false, nil
	}
	if err != nil {
		return notify.Settings{}, false, mapErr(err, "get settings")
	}
	st, err := decodeSettings(user, raw, updated)
	return st, err == nil, err
}

// SettingsOf implements notify.Store.
func (db *DB) SettingsOf(ctx context.Context, users []string) (map[string]notify.Settings, error) {
	out := make(map[string]notify.Settings)
	if len(users) == 0 {
		return out, nil
	}
	args := make([]any, len(users))
	for i, u := range users {
		args[i] = u
	}
	rows, err := db.query(ctx, `SELECT user_id, settings, updated_at FROM notification_settings WHERE user_id IN (`+placeholders(len(users))+`)`, args...)
	if err != nil {
		return nil, mapErr(err, "get settings")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			user, raw string
			updated   int64
		)
		if err := rows.Scan(&user, &raw, &updated); err != nil {
			return nil, mapErr(err, "get settings")
		}
		st, err := decodeSettings(user, raw, updated)
		if err != nil {
			return nil, err
		}
		out[user] = st
	}
	return out, mapErr(rows.Err(), "get settings")
}

func decodeSettings(user, raw string, updated int64) (notify.Settings, error) {
	var doc settingsDoc
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return notify.Settings{}, fmt.Errorf("decode settings of %q: %w", user, err)
	}
	return notify.Settings{Channels: doc.Channels, Categories: doc.Categories, Contacts: doc.Contacts, Locale: doc.Locale,
		Timezone: doc.Timezone, QuietHours: doc.QuietHours, UpdatedAt: fromMicros(&updated)}, nil
}

// PutSettings implements notify.Store.
func (db *DB) PutSettings(ctx context.Context, user string, s notify.Settings) error {
	raw, err := json.Marshal(settingsDoc{Channels: s.Channels, Categories: s.Categories, Contacts: s.Contacts,
		Locale: s.Locale, Timezone: s.Timezone, QuietHours: s.QuietHours})
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	_, err = db.exec(ctx, `INSERT INTO notification_settings (user_id, settings, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (user_id) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
		user, string(raw), toMicros(s.UpdatedAt))
	return mapErr(err, "put settings")
}

// Template implements notify.Store.
func (db *DB) Template(ctx context.Context, typ string) (notify.Template, bool, error) {
	var (
		t                    = notify.Template{Type: typ}
		cat, channels, rules string
		updated              int64
	)
	err := db.queryRow(ctx, `SELECT category, channels, rules, updated_at FROM notification_templates WHERE type = ?`, typ).Scan(&cat, &channels, &rules, &updated)
	if errNoRows(err) {
		return t, false, nil
	}
	if err != nil {
		return t, false, mapErr(err, "get template")
	}
	if err := json.Unmarshal([]byte(channels), &t.Channels); err != nil {
		return t, false, fmt.Errorf("decode template %q: %w", typ, err)
	}
	if err := decodeRules(rules, &t); err != nil {
		return t, false, fmt.Errorf("decode template %q: %w", typ, err)
	}
	t.Category, t.UpdatedAt = notify.Category(cat), fromMicros(&updated)
	return t, true, nil
}

// PutTemplate implements notify.Store.
func (db *DB) PutTemplate(ctx context.Context, t notify.Template) error {
	raw, err := json.Marshal(t.Channels)
	if err != nil {
		return fmt.Errorf("encode template: %w", err)
	}
	rules, err := encodeRules(t)
	if err != nil {
		return err
	}
	_, err = db.exec(ctx, `INSERT INTO notification_templates (type, category, channels, rules, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (type) DO UPDATE SET category = excluded.category, channels = excluded.channels, rules = excluded.rules,
		updated_at = excluded.updated_at`,
		t.Type, string(t.Category), string(raw), rules, toMicros(t.UpdatedAt))
	return mapErr(err, "put template")
}

// TemplateCategories implements notify.Store.
func (db *DB) TemplateCategories(ctx context.Context) (map[string]notify.Category, error) {
	rows, err := db.query(ctx, `SELECT type, category FROM notification_templates`)
	if err != nil {
		return nil, mapErr(err, "list templates")
	}
	defer rows.Close()
	out := map[string]notify.Category{}
	for rows.Next() {
		var typ, cat string
		if err := rows.Scan(&typ, &cat); err != nil {
			return nil, mapErr(err, "list templates")
		}
		out[typ] = notify.Category(cat)
	}
	return out, mapErr(rows.Err(), "list templates")
}

// DeadLetters implements notify.Store.
func (db *DB) DeadLetters(ctx context.Context, after notify.Cursor, limit int) ([]notify.DeadLetter, error) {
	q := `SELECT id, notification_id, channel, user_id, error, attempts, created_at, replayed_at FROM dead_letters`
	var args []any
	if !after.IsZero() {
		q += ` WHERE created_at < ? OR (created_at = ? AND id < ?)`
		args = append(args, after.At.UnixMicro(), after.At.UnixMicro(), after.ID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	rows, err := db.query(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, mapErr(err, "list dead letters")
	}
	defer rows.Close()
	out := []notify.DeadLetter{}
	for rows.Next() {
		var (
			dl       notify.DeadLetter
			ch       string
			created  int64
			replayed *int64
		)
		if err := rows.Scan(&dl.ID, &dl.NotificationID, &ch, &dl.UserID, &dl.Error, &dl.Attempts, &created, &replayed); err != nil {
			return nil, mapErr(err, "list dead letters")
		}
		dl.Channel, dl.CreatedAt, dl.ReplayedAt = notify.Channel(ch), fromMicros(&created), fromMicros(replayed)
		out = append(out, dl)
	}
	return out, mapErr(rows.Err(), "list dead letters")
}

// ReplayDeadLetter implements notify.Store.
func (db *DB) ReplayDeadLetter(ctx context.Context, id string, now time.Time) (notify.Delivery, error) {
	var d notify.Delivery
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var (
			nid, ch  string
			replayed *int64
		)
		err := tx.QueryRowContext(ctx, db.Rebind(`SELECT notification_id, channel, replayed_at FROM dead_letters WHERE id = ?`), id).
			Scan(&nid, &ch, &replayed)
		if errNoRows(err) {
			return apperr.New(apperr.NotFound, "dead letter %q not found", id)
		}
		if err != nil {
			return err
		}
		if replayed != nil {
			return apperr.New(apperr.Conflict, "dead letter %q was already replayed", id)
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE dead_letters SET replayed_at = ? WHERE id = ?`), now.UnixMicro(), id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, db.Rebind(`UPDATE deliveries SET status = 'queued', error = '', next_attempt_at = ?, updated_at = ?
			WHERE notification_id = ? AND channel = ? AND status = 'dead'`), now.UnixMicro(), now.UnixMicro(), nid, ch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return apperr.New(apperr.Conflict, "the delivery of dead letter %q is no longer dead", id)
		}
		d, err = scanDelivery(tx.QueryRowContext(ctx, db.Rebind(`SELECT `+deliveryReadColumns+` FROM deliveries WHERE notification_id = ? AND channel = ?`), nid, ch))
		return err
	})
	return d, mapErr(err, "replay dead letter")
}
