package store

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.StatsStore = (*DB)(nil)

// TopLinks implements shorten.StatsStore. It sorts the owner's links (or
// every link) by their counters, reading the first rows of links_top or
// links_owner_top (migration 0023) rather than sorting the table; with a
// domain, those rows filtered to the domain's links.
func (db *DB) TopLinks(ctx context.Context, owner string, all bool, domain *string, limit int) ([]shorten.Link, error) {
	const order = ` ORDER BY clicks DESC, bot_hits DESC, id DESC LIMIT ?`
	if domain != nil {
		if all {
			return db.queryLinks(ctx, "top links", `SELECT `+linkColumns+` FROM links WHERE domain = ?`+order, *domain, limit)
		}
		return db.queryLinks(ctx, "top links", `SELECT `+linkColumns+` FROM links WHERE owner = ? AND domain = ?`+order, owner, *domain, limit)
	}
	if all {
		return db.queryLinks(ctx, "top links", `SELECT `+linkColumns+` FROM links`+order, limit)
	}
	return db.queryLinks(ctx, "top links", `SELECT `+linkColumns+` FROM links WHERE owner = ?`+order, owner, limit)
}

// LinkClicks implements shorten.StatsStore with one grouped scan of the
// link's click rows over the span (link_clicks_link_at serves it).
func (db *DB) LinkClicks(ctx context.Context, linkID int64, since, until time.Time, bucket time.Duration) ([]shorten.ClickBucket, map[string]int64, error) {
	width := bucket.Microseconds()
	rows, err := db.query(ctx, `SELECT (at / ?) * ? AS b, bot, reason, COUNT(*) FROM link_clicks
		WHERE link_id = ? AND at >= ? AND at < ? GROUP BY b, bot, reason ORDER BY b`,
		width, width, linkID, since.UnixMicro(), until.UnixMicro())
	if err != nil {
		return nil, nil, mapErr(err, "link clicks")
	}
	defer rows.Close()
	buckets := []shorten.ClickBucket{}
	reasons := map[string]int64{}
	for rows.Next() {
		var (
			start, bot, n int64
			reason        string
		)
		if err := rows.Scan(&start, &bot, &reason, &n); err != nil {
			return nil, nil, mapErr(err, "link clicks")
		}
		at := time.UnixMicro(start).UTC()
		if len(buckets) == 0 || !buckets[len(buckets)-1].Start.Equal(at) {
			buckets = append(buckets, shorten.ClickBucket{Start: at})
		}
		b := &buckets[len(buckets)-1]
		if bot != 0 {
			b.Bot += n
			reasons[reason] += n
		} else {
			b.Human += n
		}
	}
	return buckets, reasons, mapErr(rows.Err(), "link clicks")
}
