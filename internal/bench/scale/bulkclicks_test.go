package scale_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// bulkBatch is the clicks one bulk statement set writes.
const bulkBatch = 200_000

// The codes link_clicks stores for device and OS names (the store's
// deviceCodes and osCodes, migration 0018).
var (
	deviceCode = map[string]int{shorten.DeviceOther: 0, shorten.DeviceDesktop: 1, shorten.DeviceMobile: 2, shorten.DeviceTablet: 3, shorten.DeviceBot: 4, "tv": 5}
	osCode     = map[string]int{"other": 0, "windows": 1, "macos": 2, "ios": 3, "android": 4, "linux": 5, "chromeos": 6, "freebsd": 7, "openbsd": 8}
)

// bulkSpan is one step's clicks for the bulk fill: clicks lo to hi-1 of a
// step that began at stepLo and ends at stepHi. A tenth (i % 10 == 0) go
// to the hot link, at a time spread over the window; the others walk the
// links in order (link 1 + (i-stepLo)*(links-1)/(stepHi-stepLo)), each a
// time uniform in 0 to 12 hours (mean 6 h) after its link was made.
type bulkSpan struct {
	lo, hi, stepLo, stepHi int64
	firstID, links         int64 // link ids firstID to firstID+links-1; firstID is the hot link
	from, linkStep, now    int64 // window start, microseconds between two links made, now (Unix µs)
}

// sqlCase is CASE expr WHEN 0 THEN vals[0] ... END.
func sqlCase(expr string, vals []string) string {
	var b strings.Builder
	b.WriteString("CASE " + expr)
	for i, v := range vals {
		fmt.Fprintf(&b, " WHEN %d THEN %s", i, v)
	}
	return b.String() + " END"
}

func quoted(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return out
}

// bulkClicksSQL returns the statements of one span: the links' counters,
// the click rows, and the rollups, each reading the same clicks from a CTE
// computed from i alone (multiplicative hashes, below 2^63 on both
// engines). Parameters: lo, hi, stepLo, stepHi, firstID, links, from,
// linkStep, now.
func bulkClicksSQL(engine string) []string {
	p := func(n int) string { return "?" + strconv.Itoa(n) }
	series := "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?2), "
	visitor := "randomblob(16)"
	if engine == "postgres" {
		p = func(n int) string { return "$" + strconv.Itoa(n) + "::bigint" }
		series = "WITH s(i) AS (SELECT generate_series($1::bigint, $2::bigint - 1)), "
		visitor = "decode(md5(i::text), 'hex')"
	}
	const m = "4294967291"
	h := "h(i, h1, h2, h3) AS (SELECT i, (i * 2654435761 + 1013904223) % " + m + ", (i * 40503 + 22695477) % " + m + ", (i * 1664525 + 69069) % " + m + " FROM s), "
	link := "CASE WHEN i % 10 = 0 THEN " + p(5) + " ELSE " + p(5) + " + 1 + ((i - " + p(3) + ") * (" + p(6) + " - 1)) / (" + p(4) + " - " + p(3) + ") END"
	c := "c AS MATERIALIZED (SELECT i, link_id, " +
		"CASE WHEN i % 10 = 0 THEN " + p(7) + " + (h2 * 2000 + h1 % 2000) % " + strconv.FormatInt(window.Microseconds(), 10) +
		" ELSE min(" + p(9) + ", " + p(7) + " + (link_id - " + p(5) + ") * " + p(8) + " + (h2 * 16 + h1 % 16) % " + strconv.FormatInt((12*time.Hour).Microseconds(), 10) + ") END AS at, " +
		"CASE WHEN h3 % 20 = 0 THEN 1 ELSE 0 END AS bot, " +
		sqlCase("(h3 / 20) % "+strconv.Itoa(len(countries)), quoted(countries)) + " AS country, " +
		sqlCase("h1 % "+strconv.Itoa(len(devices)), quoted(devices)) + " AS device, " +
		sqlCase("(h1 / 4) % "+strconv.Itoa(len(systems)), quoted(systems)) + " AS os, " +
		sqlCase("(h1 / 20) % "+strconv.Itoa(len(referrers)), quoted(referrers)) + " AS referrer, " +
		sqlCase("(h2 / 7) % "+strconv.Itoa(len(languages)), quoted(languages)) + " AS language " +
		"FROM (SELECT i, h1, h2, h3, " + link + " AS link_id FROM h) AS x) "
	if engine == "postgres" {
		c = strings.Replace(c, "min(", "least(", 1)
	}
	with := series + h + c
	counters := with + ", a AS (SELECT link_id, SUM(1 - bot) AS humans, SUM(bot) AS bots, MIN(CASE WHEN bot = 0 THEN at END) AS first FROM c GROUP BY link_id) " +
		"UPDATE links SET clicks = links.clicks + a.humans, bot_hits = links.bot_hits + a.bots, first_click_at = COALESCE(links.first_click_at, a.first) FROM a WHERE links.id = a.link_id"
	clicks := with + "INSERT INTO link_clicks (link_id, at, bot, reason, visitor, visitor_id, target, source, country, device, os, language, referrer, click_id) " +
		"SELECT link_id, at, bot, '', '', " + visitor + ", '', 0, country, " +
		"CASE device" + whenCodes(devices, deviceCode) + " END, CASE os" + whenCodes(systems, osCode) + " END, language, referrer, NULL FROM c ORDER BY i"
	dims := []string{"1, country", "2, device", "3, os", "4, referrer", "5, language", "6, 'link'", "7, ''"}
	var u []string
	for _, d := range dims {
		u = append(u, "SELECT link_id, at / 3600000000 AS hour, "+d+" AS value, bot FROM c")
	}
	// The bot hits by reason (the bulk clicks' reason is ''), bots only.
	u = append(u, "SELECT link_id, at / 3600000000 AS hour, 8, '' AS value, bot FROM c WHERE bot = 1")
	// The union's columns are named by its first SELECT.
	u[0] = "SELECT link_id, at / 3600000000 AS hour, 1 AS dim, country AS value, bot FROM c"
	const upsert = " GROUP BY link_id, hour, dim, value ON CONFLICT (link_id, hour, dim, value) DO UPDATE SET " +
		"humans = link_rollups.humans + excluded.humans, bots = link_rollups.bots + excluded.bots"
	// As RecordClicks: the batch's clicks go into the rollups of links
	// already rolled up (store.RollUpAt); a link this batch brings to the
	// threshold has all its raw clicks rolled up, this batch's included;
	// the others have none.
	rolled := ", rl AS (SELECT id FROM links WHERE rolled_up = 1 AND id IN (SELECT link_id FROM c)) "
	rollups := with + rolled + "INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) " +
		"SELECT link_id, hour, dim, value, SUM(1 - bot), SUM(bot) FROM (" + strings.Join(u, " UNION ALL ") + ") AS r " +
		"WHERE link_id IN (SELECT id FROM rl)" + upsert
	reached := fmt.Sprintf(", rc AS (SELECT id FROM links WHERE rolled_up = 0 AND clicks + bot_hits >= %d AND id IN (SELECT link_id FROM c)) ", store.RollUpAt)
	src := "lc AS (SELECT link_id, at / 3600000000 AS hour, bot, reason, target, CASE source WHEN 1 THEN 'qr' ELSE 'link' END AS source, country, " +
		sqlCase("device", quoted(deviceNames())) + " AS device, " + sqlCase("os", quoted(osNames())) + " AS os, language, referrer " +
		"FROM link_clicks WHERE link_id IN (SELECT id FROM rc)) "
	var v []string
	for i, col := range []string{"country", "device", "os", "referrer", "language", "source", "target"} {
		v = append(v, fmt.Sprintf("SELECT link_id, hour, %d AS dim, %s AS value, bot FROM lc", i+1, col))
	}
	v = append(v, "SELECT link_id, hour, 8, reason, bot FROM lc WHERE bot = 1")
	backfill := with + reached + ", " + src + "INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) " +
		"SELECT link_id, hour, dim, value, SUM(1 - bot), SUM(bot) FROM (" + strings.Join(v, " UNION ALL ") + ") AS r WHERE true" + upsert
	flip := with + reached + "UPDATE links SET rolled_up = 1 WHERE id IN (SELECT id FROM rc)"
	return []string{counters, clicks, rollups, backfill, flip}
}

// deviceNames and osNames are deviceCode and osCode in code order.
func deviceNames() []string { return codeNames(deviceCode) }
func osNames() []string     { return codeNames(osCode) }

func codeNames(table map[string]int) []string {
	names := make([]string, len(table))
	for n, c := range table {
		names[c] = n
	}
	return names
}

func whenCodes(names []string, table map[string]int) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			fmt.Fprintf(&b, " WHEN '%s' THEN %d", n, table[n])
		}
	}
	return b.String()
}

// bulkClicks writes span's clicks in batches of bulkBatch, one transaction
// each.
func bulkClicks(ctx context.Context, db *store.DB, engine string, span bulkSpan, batch int64) error {
	qs := bulkClicksSQL(engine)
	for lo := span.lo; lo < span.hi; lo += batch {
		hi := min(span.hi, lo+batch)
		err := filling(func() error {
			return db.InTx(ctx, func(tx *sql.Tx) error {
				for _, q := range qs {
					if _, err := tx.ExecContext(ctx, q, lo, hi, span.stepLo, span.stepHi, span.firstID, span.links, span.from, span.linkStep, span.now); err != nil {
						return fmt.Errorf("%w\n%s", err, q)
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
