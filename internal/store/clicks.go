package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.ClickStore = (*DB)(nil)

// linkTally is one link's share of a batch of clicks.
type linkTally struct {
	clicks, bots int64
	first        time.Time
}

// clickRows is the multi-row INSERT of click rows, in the order RecordClicks
// appends their parameters.
var clickRows = multiRow{
	prefix: "INSERT INTO link_clicks (link_id, at, bot, reason, visitor, visitor_id, target, " + clickDimColumns + ") VALUES ",
	row:    "(?, ?, ?, ?, ?, ?, ?, " + clickDimParams + ")",
}

// clickParams is the number of parameters of a click row.
const clickParams = 14

// countRows adds a batch's clicks to its links' counters, a row a link,
// and returns each link's hits and rolled_up; a link deleted meanwhile
// returns nothing. The VALUES' columns are column1 to column4 on both
// engines; the casts give PostgreSQL their types.
var countRows = multiRow{
	prefix: `UPDATE links SET clicks = clicks + v.c, bot_hits = bot_hits + v.b, first_click_at = COALESCE(first_click_at, v.f)
	FROM (SELECT column1 AS link, column2 AS c, column3 AS b, column4 AS f FROM (VALUES `,
	row:    "(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))",
	suffix: `) AS x) AS v WHERE id = v.link RETURNING id, clicks + bot_hits, rolled_up`,
}

// countParams is the number of parameters of a countRows row.
const countParams = 4

// RecordClicks implements shorten.ClickStore: the links' counters in one
// statement (countRows), then the click rows of the links that still
// exist and the rollups of those at or past RollUpAt hits
// (linkrollups.go), in one transaction, with statements prepared once
// (clickbatch.go).
func (db *DB) RecordClicks(ctx context.Context, clicks []shorten.Click) error {
	if len(clicks) == 0 {
		return nil
	}
	tallies, order := tallyClicks(clicks)
	counts, err := db.prepareRows(ctx, countRows, len(order))
	if err != nil {
		return err
	}
	inserts, err := db.prepareRows(ctx, clickRows, len(clicks))
	if err != nil {
		return err
	}
	// Which links' rollups the batch writes is known only once their
	// counters are updated: every size a chunk of rollup rows can have
	// (prepared once per store, then found in its cache).
	upserts, err := db.prepareRows(ctx, rollupRows, 2*rowsChunk-1)
	if err != nil {
		return err
	}
	return db.InTx(ctx, func(tx *sql.Tx) error {
		if db.dialect == DialectPostgres {
			// The update's join visits the links in no set order: lock
			// them in id order first, as every writer of their rows does.
			if _, err := db.lockLinks(ctx, tx, order); err != nil {
				return err
			}
		}
		bc, err := countClicks(ctx, tx, counts, tallies, order)
		if err != nil {
			return err
		}
		kept := clicks
		if len(bc.found) < len(order) {
			kept = slices.DeleteFunc(slices.Clone(clicks), func(c shorten.Click) bool { return !bc.found[c.LinkID] })
		}
		if err := insertClicks(ctx, tx, inserts, kept); err != nil {
			return err
		}
		counted := kept
		if len(bc.rolled) < len(tallies) {
			counted = make([]shorten.Click, 0, len(kept))
			for _, c := range kept {
				if bc.rolled[c.LinkID] {
					counted = append(counted, c)
				}
			}
		}
		// The links that reached RollUpAt: all their raw clicks, this
		// batch's included.
		all, err := db.rollUpLinks(ctx, tx, bc.reached)
		if err != nil {
			return err
		}
		if len(all) > 0 {
			counted = slices.Concat(counted, all)
		}
		rollups := newRollups(counted)
		return mapErr(upserts.exec(ctx, tx, len(rollups.keys), rollupParams, rollups.args), "update click rollups")
	})
}

// tallyClicks sums a batch's clicks by link; order is the links' ids,
// sorted: a fixed lock order keeps concurrent flushers from deadlocking on
// PostgreSQL.
func tallyClicks(clicks []shorten.Click) (tallies map[int64]*linkTally, order []int64) {
	tallies = map[int64]*linkTally{}
	for _, c := range clicks {
		t := tallies[c.LinkID]
		if t == nil {
			t = &linkTally{}
			tallies[c.LinkID] = t
			order = append(order, c.LinkID)
		}
		if c.Bot {
			t.bots++
			continue
		}
		t.clicks++
		if t.first.IsZero() || c.At.Before(t.first) {
			t.first = c.At
		}
	}
	slices.Sort(order)
	return tallies, order
}

// batchCounts is what adding a batch to its links' counters found.
type batchCounts struct {
	found   map[int64]bool // the links that still exist
	rolled  map[int64]bool // links whose rollups take this batch's clicks
	reached []int64        // links this batch brings to RollUpAt hits, sorted
}

// countClicks adds the tallies to their links' counters (countRows).
func countClicks(ctx context.Context, tx *sql.Tx, counts rowStmts, tallies map[int64]*linkTally, order []int64) (batchCounts, error) {
	c := batchCounts{found: make(map[int64]bool, len(order)), rolled: map[int64]bool{}}
	err := counts.query(ctx, tx, len(order), countParams, func(i int, dst []any) []any {
		t := tallies[order[i]]
		return append(dst, order[i], t.clicks, t.bots, toMicros(t.first))
	}, func(rows *sql.Rows) error {
		var id, hits, rolledUp int64
		if err := rows.Scan(&id, &hits, &rolledUp); err != nil {
			return err
		}
		c.found[id] = true
		switch {
		case rolledUp == 1:
			c.rolled[id] = true
		case hits >= RollUpAt:
			c.reached = append(c.reached, id)
		}
		return nil
	})
	if err != nil {
		return batchCounts{}, mapErr(err, "count clicks")
	}
	slices.Sort(c.reached)
	return c, nil
}

// insertClicks writes the click rows (clickRows).
func insertClicks(ctx context.Context, tx *sql.Tx, inserts rowStmts, clicks []shorten.Click) error {
	visitors := map[string][2]any{} // a batch holds few visitors: each decoded once
	err := inserts.exec(ctx, tx, len(clicks), clickParams, func(i int, args []any) []any {
		c := &clicks[i]
		v, ok := visitors[c.Visitor]
		if !ok {
			v[0], v[1] = visitorColumns(c.Visitor)
			visitors[c.Visitor] = v
		}
		args = append(args, c.LinkID, c.At.UnixMicro(), boolInt(c.Bot), c.Reason, v[0], v[1], c.Target)
		return appendClickDims(args, c.Dimensions)
	})
	return mapErr(err, "record clicks")
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
