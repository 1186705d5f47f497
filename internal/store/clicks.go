package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"maps"
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
	deviceNames = []string{shorten.DeviceOther, shorten.DeviceDesktop, shorten.DeviceMobile, shorten.DeviceTablet, shorten.DeviceBot, "tv"}
	osNames     = []string{"other", "windows", "macos", "ios", "android", "linux", "chromeos", "freebsd", "openbsd"}
	deviceCodes = codeTable(deviceNames...)
	osCodes     = codeTable(osNames...)
)

func codeTable(names ...string) map[string]int64 {
	m := make(map[string]int64, len(names))
	for i, n := range names {
		m[n] = int64(i)
	}
	return m
}

// visitorColumns returns the visitor and visitor_id columns of a click:
// the visitor hash (32 hex digits, as shorten makes it) as its 16 bytes in
// visitor_id with visitor empty, 16 bytes a click less than the text
// (migration 0019); any other value, as rows before 0019 held, in visitor.
func visitorColumns(v string) (text, raw any) {
	if len(v) != 32 || strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) >= 0 {
		return v, nil
	}
	b := make([]byte, 16)
	if _, err := hex.Decode(b, []byte(v)); err != nil {
		return v, nil
	}
	return "", b
}

func appendClickDims(args []any, d shorten.Dimensions) []any {
	return append(args, int64(d.Source), d.Country, deviceCodes[d.Device], osCodes[d.OS], d.Language, d.Referrer, nullString(d.ClickID))
}

// dimBotReason is the rollups' count of bot hits by reason (bots only).
// It is not a dimension stats group clicks by: it answers the bot reasons
// of GET /v1/links/{code}/clicks without reading raw clicks.
const dimBotReason shorten.Dim = 8

// rollupKey is one counter row of link_rollups.
type rollupKey struct {
	link, hour int64
	dim        shorten.Dim
	value      string
}

// rollups are a batch's clicks added up by counter row: one per link,
// hour, dimension and value, whatever the number of clicks, in key order,
// so concurrent flushers on PostgreSQL lock rows in the same order and
// cannot deadlock.
type rollups struct {
	keys   []rollupKey
	counts map[rollupKey]*[2]int64 // humans, bots
}

func newRollups(clicks []shorten.Click) rollups {
	// Clicks alike in link, hour, kind and dimensions are counted first,
	// one map access a click; their rows are then added per group, which
	// are few (a hot link's clicks come from a few browsers).
	type group struct {
		link, hour int64
		bot        bool
		reason     string // a bot's
		d          shorten.Dimensions
	}
	groups := map[group]int64{}
	for _, c := range clicks {
		d := c.Dimensions
		d.ClickID = "" // not a rollup dimension, and unique per click
		g := group{link: c.LinkID, hour: c.At.Unix() / 3600, bot: c.Bot, d: d}
		if c.Bot {
			g.reason = c.Reason
		}
		groups[g]++
	}
	r := rollups{counts: map[rollupKey]*[2]int64{}}
	add := func(k rollupKey, bot bool, count int64) {
		n := r.counts[k]
		if n == nil {
			n = new([2]int64)
			r.counts[k] = n
			r.keys = append(r.keys, k)
		}
		if bot {
			n[1] += count
		} else {
			n[0] += count
		}
	}
	for g, count := range groups {
		for _, dim := range shorten.Dims {
			add(rollupKey{g.link, g.hour, dim, g.d.Value(dim)}, g.bot, count)
		}
		if g.bot {
			add(rollupKey{g.link, g.hour, dimBotReason, g.reason}, true, count)
		}
	}
	slices.SortFunc(r.keys, func(a, b rollupKey) int {
		return cmp.Or(cmp.Compare(a.link, b.link), cmp.Compare(a.hour, b.hour), cmp.Compare(a.dim, b.dim), strings.Compare(a.value, b.value))
	})
	return r
}

// args appends the parameters of row i of rollupRows.
func (r *rollups) args(i int, dst []any) []any {
	k := r.keys[i]
	n := r.counts[k]
	return append(dst, k.link, k.hour, int64(k.dim), k.value, n[0], n[1])
}

// rollupRows is the multi-row upsert of rollup rows (rollups.args' order).
var rollupRows = multiRow{
	prefix: "INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) VALUES ",
	row:    "(?, ?, ?, ?, ?, ?)",
	suffix: ` ON CONFLICT (link_id, hour, dim, value) DO UPDATE SET
		humans = link_rollups.humans + excluded.humans, bots = link_rollups.bots + excluded.bots`,
}

const rollupParams = 6

// deleteLinkAnalytics drops the rollups and conversions of links ids.
func (db *DB) deleteLinkAnalytics(ctx context.Context, tx *sql.Tx, ids []any) error {
	in := "(" + marks(len(ids)) + ")"
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
