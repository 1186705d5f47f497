package store

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

var (
	_ shorten.VisitStore     = (*DB)(nil)
	_ shorten.AnalyticsStore = (*DB)(nil)
)

// linkExtraColumns are the columns of migration 0018 every links read
// selects after the original ones, in scanLink's order.
const linkExtraColumns = "max_visits, visits, fallback_url, click_ids, conversions"

// ConsumeVisit implements shorten.VisitStore with one conditional UPDATE:
// on PostgreSQL concurrent updates of the row queue on its lock and each
// re-checks visits < max_visits against the row as committed before it, and
// SQLite has one writer, so exactly max_visits calls succeed whatever the
// number of nodes.
func (db *DB) ConsumeVisit(ctx context.Context, linkID int64) (bool, error) {
	res, err := db.exec(ctx, `UPDATE links SET visits = visits + 1
		WHERE id = ? AND max_visits IS NOT NULL AND visits < max_visits`, linkID)
	if err != nil {
		return false, mapErr(err, "consume visit")
	}
	n, err := res.RowsAffected()
	return n == 1, mapErr(err, "consume visit")
}

func nullPositive(n int64) any {
	if n <= 0 {
		return nil
	}
	return n
}

// The click dimensions' columns, parameters and compact codes: device and
// OS are stored as small integers (a byte or two per row instead of the
// names), decoded back to names only in the rollups, which are few.
const (
	clickDimColumns = "source, country, device, os, language, referrer, click_id"
	clickDimParams  = "?, ?, ?, ?, ?, ?, ?"
)

var (
	deviceCodes = codeTable(shorten.DeviceOther, shorten.DeviceDesktop, shorten.DeviceMobile, shorten.DeviceTablet, shorten.DeviceBot, "tv")
	osCodes     = codeTable("other", "windows", "macos", "ios", "android", "linux", "chromeos", "freebsd", "openbsd")
)

func codeTable(names ...string) map[string]int64 {
	m := make(map[string]int64, len(names))
	for i, n := range names {
		m[n] = int64(i)
	}
	return m
}

func appendClickDims(args []any, d shorten.Dimensions) []any {
	return append(args, int64(d.Source), d.Country, deviceCodes[d.Device], osCodes[d.OS], d.Language, d.Referrer, nullString(d.ClickID))
}

// rollupKey is one counter row of link_rollups.
type rollupKey struct {
	link, hour int64
	dim        shorten.Dim
	value      string
}

// upsertRollups adds clicks to their hourly counters, one row per link,
// hour, dimension and value, inside the transaction that stores them.
// Rows are written in key order, so concurrent flushers on PostgreSQL
// lock them in the same order and cannot deadlock.
func (db *DB) upsertRollups(ctx context.Context, tx *sql.Tx, clicks []shorten.Click) error {
	counts := map[rollupKey]*[2]int64{}
	for _, c := range clicks {
		hour := c.At.Unix() / 3600
		for _, d := range shorten.Dims {
			k := rollupKey{c.LinkID, hour, d, c.Dimensions.Value(d)}
			n := counts[k]
			if n == nil {
				n = new([2]int64)
				counts[k] = n
			}
			if c.Bot {
				n[1]++
			} else {
				n[0]++
			}
		}
	}
	keys := make([]rollupKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rollupKey) int {
		return cmp.Or(cmp.Compare(a.link, b.link), cmp.Compare(a.hour, b.hour), cmp.Compare(a.dim, b.dim), strings.Compare(a.value, b.value))
	})
	for chunk := range slices.Chunk(keys, insertChunk) {
		var q strings.Builder
		q.WriteString("INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) VALUES ")
		args := make([]any, 0, len(chunk)*6)
		for i, k := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?)")
			n := counts[k]
			args = append(args, k.link, k.hour, int64(k.dim), k.value, n[0], n[1])
		}
		q.WriteString(` ON CONFLICT (link_id, hour, dim, value) DO UPDATE SET
			humans = link_rollups.humans + excluded.humans, bots = link_rollups.bots + excluded.bots`)
		if _, err := tx.ExecContext(ctx, db.Rebind(q.String()), args...); err != nil {
			return mapErr(err, "update click rollups")
		}
	}
	return nil
}

// deleteLinkAnalytics drops the rollups and conversions of links ids.
func (db *DB) deleteLinkAnalytics(ctx context.Context, tx *sql.Tx, ids []any) error {
	in := "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
	for _, table := range []string{"link_rollups", "link_conversions"} {
		if _, err := tx.ExecContext(ctx, db.Rebind("DELETE FROM "+table+" WHERE link_id IN "+in), ids...); err != nil {
			return mapErr(err, "delete link analytics")
		}
	}
	return nil
}

// LinkStats implements shorten.AnalyticsStore with three grouped reads of
// small tables: the source rollups (every click has a source, so they sum
// to the totals), the conversions, and the rollups of dim. None scans raw
// clicks.
func (db *DB) LinkStats(ctx context.Context, linkID, fromHour, toHour, bucketHours int64, dim shorten.Dim, limit int) ([]shorten.StatsBucket, []shorten.GroupCount, error) {
	rows, err := db.query(ctx, `SELECT (hour / ?) * ? AS b, CAST(SUM(humans) AS BIGINT), CAST(SUM(bots) AS BIGINT)
		FROM link_rollups WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ? GROUP BY b ORDER BY b`,
		bucketHours, bucketHours, linkID, int64(shorten.DimSource), fromHour, toHour)
	if err != nil {
		return nil, nil, mapErr(err, "link stats")
	}
	byStart := map[int64]*shorten.StatsBucket{}
	var starts []int64
	bucket := func(h int64) *shorten.StatsBucket {
		b := byStart[h]
		if b == nil {
			b = &shorten.StatsBucket{Start: time.Unix(h*3600, 0).UTC()}
			byStart[h] = b
			starts = append(starts, h)
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
	slices.Sort(starts)
	series := make([]shorten.StatsBucket, len(starts))
	for i, h := range starts {
		series[i] = *byStart[h]
	}
	groups, err := db.linkGroups(ctx, linkID, fromHour, toHour, dim, limit)
	return series, groups, err
}

func (db *DB) linkGroups(ctx context.Context, linkID, fromHour, toHour int64, dim shorten.Dim, limit int) ([]shorten.GroupCount, error) {
	rows, err := db.query(ctx, `SELECT value, CAST(SUM(humans) AS BIGINT) AS h, CAST(SUM(bots) AS BIGINT) AS b
		FROM link_rollups WHERE link_id = ? AND dim = ? AND hour >= ? AND hour < ?
		GROUP BY value ORDER BY h DESC, b DESC, value LIMIT ?`, linkID, int64(dim), fromHour, toHour, limit)
	if err != nil {
		return nil, mapErr(err, "link groups")
	}
	defer rows.Close()
	groups := []shorten.GroupCount{}
	for rows.Next() {
		var g shorten.GroupCount
		if err := rows.Scan(&g.Value, &g.Humans, &g.Bots); err != nil {
			return nil, mapErr(err, "link groups")
		}
		groups = append(groups, g)
	}
	return groups, mapErr(rows.Err(), "link groups")
}
