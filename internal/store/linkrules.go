package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.Store = (*DB)(nil)

// SetLinkRules implements shorten.Store.
func (db *DB) SetLinkRules(ctx context.Context, domain, code string, rules []shorten.Rule) (shorten.Link, error) {
	var l shorten.Link
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		l, err = scanLink(tx.QueryRowContext(ctx, db.Rebind(`UPDATE links SET rules = ? WHERE domain = ? AND code = ? RETURNING `+linkColumns),
			nullString(shorten.EncodeRules(rules)), domain, code))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return shorten.Link{}, apperr.New(apperr.NotFound, "link %q not found", code)
	}
	return l, mapErr(err, "set link rules")
}

// decodeLinkRules reads the rules column; rules a newer version wrote in
// a form this one cannot read fail the read, rather than redirect every
// visitor to the default.
func decodeLinkRules(rules *string) ([]shorten.Rule, error) {
	if rules == nil {
		return nil, nil
	}
	return shorten.DecodeRules(*rules)
}

// LinkTargetClicks counts the human clicks on a link from since, by the
// rule that picked their target (link_clicks_link_at serves it).
func (db *DB) LinkTargetClicks(ctx context.Context, linkID int64, since time.Time) (map[string]int64, error) {
	rows, err := db.query(ctx, `SELECT target, COUNT(*) FROM link_clicks
		WHERE link_id = ? AND at >= ? AND bot = 0 GROUP BY target`, linkID, since.UnixMicro())
	if err != nil {
		return nil, mapErr(err, "count link targets")
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var target string
		var n int64
		if err := rows.Scan(&target, &n); err != nil {
			return nil, mapErr(err, "count link targets")
		}
		out[target] = n
	}
	return out, mapErr(rows.Err(), "count link targets")
}
