package store

import (
	"context"
	"database/sql"
	"maps"
	"slices"
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

// LinkClicks implements shorten.StatsStore. When buckets are whole hours,
// the whole hours of the span come from the link's source rollups (which
// sum to each hour's humans and bots) and only the partial first and last
// hours from its raw clicks, so the cost does not grow with the link's
// traffic; shorter buckets group the raw clicks of the span
// (link_clicks_link_at). Bot reasons come from the reason rollups and, for
// partial hours, the bot hits alone (see botReasons). A link below
// RollUpAt hits has its few raw clicks read over the whole span, beside
// the rollups of the clicks the purge removed (linkrollups.go).
func (db *DB) LinkClicks(ctx context.Context, linkID int64, since, until time.Time, bucket time.Duration) (series []shorten.ClickBucket, reasons map[string]int64, err error) {
	err = db.withRawClicks(ctx, linkID, func(raw bool) error {
		series, reasons, err = db.linkClicks(ctx, linkID, since, until, bucket, raw)
		return err
	})
	return series, reasons, err
}

func (db *DB) linkClicks(ctx context.Context, linkID int64, since, until time.Time, bucket time.Duration, allRaw bool) ([]shorten.ClickBucket, map[string]int64, error) {
	const hour = int64(time.Hour / time.Microsecond)
	width := bucket.Microseconds()
	from, to := max(since.UnixMicro(), 0), until.UnixMicro() // no click is older than 1970
	s := clickSeries{width: width, byStart: map[int64]*shorten.ClickBucket{}}
	raw := [][2]int64{{from, to}}
	if first, last, edges, ok := wholeHours(from, to); width%hour == 0 && ok {
		rows, err := db.query(ctx, `SELECT hour, CAST(SUM(humans) AS BIGINT), CAST(SUM(bots) AS BIGINT) FROM link_rollups
			WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ? GROUP BY hour`,
			linkID, int64(shorten.DimSource), first, last)
		if err != nil {
			return nil, nil, mapErr(err, "link clicks")
		}
		if err := s.add(rows, hour); err != nil {
			return nil, nil, mapErr(err, "link clicks")
		}
		if !allRaw {
			raw = edges
		}
	}
	for _, span := range raw {
		rows, err := db.query(ctx, `SELECT (at / ?) * ? AS b, CAST(SUM(CASE WHEN bot = 0 THEN 1 ELSE 0 END) AS BIGINT), CAST(SUM(bot) AS BIGINT)
			FROM link_clicks WHERE link_id = ? AND at >= ? AND at < ? GROUP BY b`,
			width, width, linkID, span[0], span[1])
		if err != nil {
			return nil, nil, mapErr(err, "link clicks")
		}
		if err := s.add(rows, 1); err != nil {
			return nil, nil, mapErr(err, "link clicks")
		}
	}
	reasons, err := db.botReasons(ctx, linkID, from, to, allRaw)
	if err != nil {
		return nil, nil, err
	}
	return s.buckets(), reasons, nil
}

// botReasons counts the link's bot hits in [from, to) by reason: the whole
// hours from the reason rollups, the partial first and last hours (or,
// with allRaw, the whole span) through the partial index of bot hits
// (link_clicks_bots).
func (db *DB) botReasons(ctx context.Context, linkID, from, to int64, allRaw bool) (map[string]int64, error) {
	reasons := map[string]int64{}
	raw := [][2]int64{{from, to}}
	if first, last, edges, ok := wholeHours(from, to); ok {
		rows, err := db.query(ctx, `SELECT value, CAST(SUM(bots) AS BIGINT) FROM link_rollups
			WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ? GROUP BY value`,
			linkID, int64(dimBotReason), first, last)
		if err != nil {
			return nil, mapErr(err, "link clicks")
		}
		if err := addReasons(reasons, rows); err != nil {
			return nil, mapErr(err, "link clicks")
		}
		if !allRaw {
			raw = edges
		}
	}
	for _, span := range raw {
		rows, err := db.query(ctx, `SELECT reason, COUNT(*) FROM link_clicks
			WHERE link_id = ? AND bot = 1 AND at >= ? AND at < ? GROUP BY reason`, linkID, span[0], span[1])
		if err != nil {
			return nil, mapErr(err, "link clicks")
		}
		if err := addReasons(reasons, rows); err != nil {
			return nil, mapErr(err, "link clicks")
		}
	}
	return reasons, nil
}

// wholeHours splits [from, to) (Unix microseconds, from >= 0) into the
// whole hours [first, last) it covers and the non-empty partial spans
// before and after them; ok is false when it covers no whole hour.
func wholeHours(from, to int64) (first, last int64, edges [][2]int64, ok bool) {
	const hour = int64(time.Hour / time.Microsecond)
	first, last = (from+hour-1)/hour, to/hour
	if first >= last {
		return 0, 0, nil, false
	}
	for _, span := range [][2]int64{{from, first * hour}, {last * hour, to}} {
		if span[0] < span[1] {
			edges = append(edges, span)
		}
	}
	return first, last, edges, true
}

// addReasons adds rows of (reason, count) to reasons and closes them.
func addReasons(reasons map[string]int64, rows *sql.Rows) error {
	defer rows.Close()
	for rows.Next() {
		var (
			reason string
			n      int64
		)
		if err := rows.Scan(&reason, &n); err != nil {
			return err
		}
		reasons[reason] += n
	}
	return rows.Err()
}

// clickSeries adds up rows of (start, humans, bots) into buckets of width
// microseconds.
type clickSeries struct {
	width   int64
	byStart map[int64]*shorten.ClickBucket
}

// add reads rows whose first column is a time in units of unit
// microseconds, and closes them.
func (s *clickSeries) add(rows *sql.Rows, unit int64) error {
	defer rows.Close()
	for rows.Next() {
		var at, humans, bots int64
		if err := rows.Scan(&at, &humans, &bots); err != nil {
			return err
		}
		start := at * unit / s.width * s.width
		b := s.byStart[start]
		if b == nil {
			b = &shorten.ClickBucket{Start: time.UnixMicro(start).UTC()}
			s.byStart[start] = b
		}
		b.Human += humans
		b.Bot += bots
	}
	return rows.Err()
}

func (s *clickSeries) buckets() []shorten.ClickBucket {
	out := make([]shorten.ClickBucket, 0, len(s.byStart))
	for _, b := range s.byStart {
		if b.Human > 0 || b.Bot > 0 {
			out = append(out, *b)
		}
	}
	slices.SortFunc(out, func(a, b shorten.ClickBucket) int { return a.Start.Compare(b.Start) })
	return out
}

// LinkStats implements shorten.StatsStore with three grouped reads of
// small tables: the source rollups (every click has a source, so they sum
// to the totals), the conversions, and the rollups of dim. None scans raw
// clicks, but for a link below RollUpAt hits, whose few raw clicks are
// read and added (linkrollups.go).
func (db *DB) LinkStats(ctx context.Context, linkID, fromHour, toHour, bucketHours int64, dim shorten.Dim, limit int) (series []shorten.StatsBucket, groups []shorten.GroupCount, err error) {
	err = db.withRawClicks(ctx, linkID, func(raw bool) error {
		series, groups, err = db.linkStats(ctx, linkID, fromHour, toHour, bucketHours, dim, limit, raw)
		return err
	})
	return series, groups, err
}

func (db *DB) linkStats(ctx context.Context, linkID, fromHour, toHour, bucketHours int64, dim shorten.Dim, limit int, raw bool) ([]shorten.StatsBucket, []shorten.GroupCount, error) {
	rows, err := db.query(ctx, `SELECT (hour / ?) * ? AS b, CAST(SUM(humans) AS BIGINT), CAST(SUM(bots) AS BIGINT)
		FROM link_rollups WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ? GROUP BY b ORDER BY b`,
		bucketHours, bucketHours, linkID, int64(shorten.DimSource), fromHour, toHour)
	if err != nil {
		return nil, nil, mapErr(err, "link stats")
	}
	byStart := map[int64]*shorten.StatsBucket{}
	bucket := func(h int64) *shorten.StatsBucket {
		b := byStart[h]
		if b == nil {
			b = &shorten.StatsBucket{Start: time.Unix(h*3600, 0).UTC()}
			byStart[h] = b
		}
		return b
	}
	for rows.Next() {
		var h, humans, bots int64
		if err := rows.Scan(&h, &humans, &bots); err != nil {
			rows.Close()
			return nil, nil, mapErr(err, "link stats")
		}
		b := bucket(h)
		b.Humans, b.Bots = humans, bots
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr(err, "link stats")
	}
	width := bucketHours * 3600 * 1_000_000
	rows, err = db.query(ctx, `SELECT (at / ?) * ? AS b, COUNT(*), SUM(value) FROM link_conversions
		WHERE link_id = ? AND at >= ? AND at < ? GROUP BY b`,
		width, bucketHours, linkID, fromHour*3600*1_000_000, toHour*3600*1_000_000)
	if err != nil {
		return nil, nil, mapErr(err, "link conversion stats")
	}
	for rows.Next() {
		var (
			h, n  int64
			value float64
		)
		if err := rows.Scan(&h, &n, &value); err != nil {
			rows.Close()
			return nil, nil, mapErr(err, "link conversion stats")
		}
		b := bucket(h)
		b.Conversions, b.ConversionValue = n, value
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, mapErr(err, "link conversion stats")
	}
	if !raw {
		groups, err := db.linkGroups(ctx, linkID, fromHour, toHour, dim, limit)
		return sortedSeries(byStart), groups, err
	}
	// The rollups of a link below RollUpAt hold only clicks the purge
	// removed, fewer than RollUpAt values: all of them, then its raw
	// clicks, added up and cut to limit here.
	groups, err := db.linkGroups(ctx, linkID, fromHour, toHour, dim, RollUpAt)
	if err != nil {
		return nil, nil, err
	}
	byValue := map[string]*shorten.GroupCount{}
	for i := range groups {
		byValue[groups[i].Value] = &groups[i]
	}
	clicks, err := db.rawClicks(ctx, linkID, fromHour*3600*1_000_000, toHour*3600*1_000_000)
	if err != nil {
		return nil, nil, err
	}
	rawStats(clicks, bucketHours, dim, byStart, byValue)
	return sortedSeries(byStart), sortGroups(byValue, limit), nil
}

// sortedSeries returns the buckets oldest first.
func sortedSeries(byStart map[int64]*shorten.StatsBucket) []shorten.StatsBucket {
	series := make([]shorten.StatsBucket, 0, len(byStart))
	for _, h := range slices.Sorted(maps.Keys(byStart)) {
		series = append(series, *byStart[h])
	}
	return series
}

func (db *DB) linkGroups(ctx context.Context, linkID, fromHour, toHour int64, dim shorten.Dim, limit int) ([]shorten.GroupCount, error) {
	rows, err := db.query(ctx, `SELECT value, CAST(SUM(humans) AS BIGINT) AS h, CAST(SUM(bots) AS BIGINT) AS b
		FROM link_rollups WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ?
		GROUP BY value ORDER BY h DESC, b DESC, value LIMIT ?`, linkID, int64(dim), fromHour, toHour, limit)
	if err != nil {
		return nil, mapErr(err, "link groups")
	}
	return appendRows([]shorten.GroupCount{}, rows, "link groups", func(row rowScanner) (g shorten.GroupCount, err error) {
		return g, row.Scan(&g.Value, &g.Humans, &g.Bots)
	})
}
