package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/internal/notify"
)

// Templates implements notify.Store.
func (db *DB) Templates(ctx context.Context) ([]notify.Template, error) {
	rows, err := db.query(ctx, `SELECT type, category, channels, rules, updated_at FROM notification_templates ORDER BY type`)
	if err != nil {
		return nil, mapErr(err, "list templates")
	}
	defer rows.Close()
	out := []notify.Template{}
	for rows.Next() {
		var (
			t                    notify.Template
			cat, channels, rules string
			updated              int64
		)
		if err := rows.Scan(&t.Type, &cat, &channels, &rules, &updated); err != nil {
			return nil, mapErr(err, "list templates")
		}
		if err := json.Unmarshal([]byte(channels), &t.Channels); err != nil {
			return nil, fmt.Errorf("decode template %q: %w", t.Type, err)
		}
		if err := decodeRules(rules, &t); err != nil {
			return nil, fmt.Errorf("decode template %q: %w", t.Type, err)
		}
		t.Category, t.UpdatedAt = notify.Category(cat), fromMicros(&updated)
		out = append(out, t)
	}
	return out, mapErr(rows.Err(), "list templates")
}

// DeleteTemplate implements notify.Store.
func (db *DB) DeleteTemplate(ctx context.Context, typ string) (bool, error) {
	res, err := db.exec(ctx, `DELETE FROM notification_templates WHERE type = ?`, typ)
	if err != nil {
		return false, mapErr(err, "delete template")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, mapErr(err, "delete template")
	}
	return n > 0, nil
}
