package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// RollUpAt is the number of hits (human clicks and bot hits) from which a
// link's clicks are counted in the hourly rollups. Below it, its stats are
// worked out from its raw clicks, fewer than RollUpAt rows: most links a
// message carries are opened once or twice, and each such click wrote
// seven rollup rows (one per dimension) beside its own, the most of what
// a click cost in bytes and in the flusher's time.
//
// links.rolled_up says which side a link is on. 1: its rollups count every
// click recorded for it (every link stored before migration 0028, and a
// link from the batch that brought it to RollUpAt hits). 0: its rollups
// count only the clicks the retention purge removed (none until then), so
// its stats add its raw clicks to them. The batch that brings a link to
// RollUpAt rolls up all of its raw clicks and sets rolled_up in the same
// transaction; on PostgreSQL the link's counter update, which comes first
// in every transaction that records or purges its clicks, holds its row
// lock until then, so no other writer's clicks can be missed or counted
// twice.
const RollUpAt = 64

// rawClickColumns are the columns scanRawClicks reads.
const rawClickColumns = "at, bot, reason, target, source, country, device, os, language, referrer"

// scanRawClicks reads rows of rawClickColumns as clicks of link and
// closes them. With link 0 (no link has that id) the rows lead with
// link_id, each its click's own.
func scanRawClicks(rows *sql.Rows, link int64) ([]shorten.Click, error) {
	defer rows.Close()
	var clicks []shorten.Click
	for rows.Next() {
		var (
			at, bot, source, device, os int64
			c                           = shorten.Click{LinkID: link}
		)
		dest := []any{&at, &bot, &c.Reason, &c.Target, &source, &c.Country, &device, &os, &c.Language, &c.Referrer}
		if link == 0 {
			dest = append([]any{&c.LinkID}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		c.At, c.Bot, c.Source = time.UnixMicro(at).UTC(), bot == 1, shorten.Source(source)
		c.Device, c.OS = codeName(deviceNames, device), codeName(osNames, os)
		clicks = append(clicks, c)
	}
	return clicks, rows.Err()
}

func codeName(names []string, code int64) string {
	if code < 0 || code >= int64(len(names)) {
		return names[0]
	}
	return names[code]
}

// rawClicks returns the link's raw clicks in [from, to) (Unix
// microseconds), read through link_clicks_link_at. Only for links below
// RollUpAt hits, which have few.
func (db *DB) rawClicks(ctx context.Context, link, from, to int64) ([]shorten.Click, error) {
	rows, err := db.query(ctx, `SELECT `+rawClickColumns+` FROM link_clicks WHERE link_id = ? AND at >= ? AND at < ?`, link, from, to)
	if err != nil {
		return nil, mapErr(err, "read raw clicks")
	}
	clicks, err := scanRawClicks(rows, link)
	return clicks, mapErr(err, "read raw clicks")
}

// rolledUp reports links.rolled_up for link: whether its rollups count
// every click recorded for it. A link that no longer exists has no clicks
// to add: true.
func (db *DB) rolledUp(ctx context.Context, link int64) (bool, error) {
	var r int64
	err := db.queryRow(ctx, `SELECT rolled_up FROM links WHERE id = ?`, link).Scan(&r)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return r == 1, mapErr(err, "read link rollup state")
}

// withRawClicks runs read, which reads the link's rollups and, when raw
// is true, adds its raw clicks, with raw set from links.rolled_up. A
// batch that rolls the link up between the state's read and the rollups'
// would make read count its clicks twice: the state is read again after,
// and read runs once more, on the rollups alone, when it changed.
func (db *DB) withRawClicks(ctx context.Context, link int64, read func(raw bool) error) error {
	rolled, err := db.rolledUp(ctx, link)
	if err != nil {
		return err
	}
	if err := read(!rolled); err != nil || rolled {
		return err
	}
	if rolled, err = db.rolledUp(ctx, link); err != nil || !rolled {
		return err
	}
	return read(false)
}

// rollUpLinks reads, in tx, the raw clicks of links that have just
// reached RollUpAt hits (this batch's included), for their rollups, and
// marks them rolled up.
func (db *DB) rollUpLinks(ctx context.Context, tx *sql.Tx, links []int64) ([]shorten.Click, error) {
	var clicks []shorten.Click
	for _, id := range links {
		rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT `+rawClickColumns+` FROM link_clicks WHERE link_id = ?`), id)
		if err != nil {
			return nil, mapErr(err, "roll up link")
		}
		cs, err := scanRawClicks(rows, id)
		if err != nil {
			return nil, mapErr(err, "roll up link")
		}
		clicks = append(clicks, cs...)
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE links SET rolled_up = 1 WHERE id = ?`), id); err != nil {
			return nil, mapErr(err, "roll up link")
		}
	}
	return clicks, nil
}

// rawStats adds clicks to series (buckets of bucketHours hours, by start)
// and to groups (by value of dim, humans and bots).
func rawStats(clicks []shorten.Click, bucketHours int64, dim shorten.Dim, series map[int64]*shorten.StatsBucket, groups map[string]*shorten.GroupCount) {
	for _, c := range clicks {
		h := c.At.Unix() / 3600 / bucketHours * bucketHours
		b := series[h]
		if b == nil {
			b = &shorten.StatsBucket{Start: time.Unix(h*3600, 0).UTC()}
			series[h] = b
		}
		v := c.Value(dim)
		g := groups[v]
		if g == nil {
			g = &shorten.GroupCount{Value: v}
			groups[v] = g
		}
		if c.Bot {
			b.Bots++
			g.Bots++
		} else {
			b.Humans++
			g.Humans++
		}
	}
}

// sortGroups orders groups as linkGroups' query does (most humans, then
// most bots, then by value) and keeps the first limit.
func sortGroups(groups map[string]*shorten.GroupCount, limit int) []shorten.GroupCount {
	out := make([]shorten.GroupCount, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b shorten.GroupCount) int {
		return cmp.Or(cmp.Compare(b.Humans, a.Humans), cmp.Compare(b.Bots, a.Bots), strings.Compare(a.Value, b.Value))
	})
	return out[:min(len(out), limit)]
}

// lockLinks returns links.rolled_up of those of links (in id order) that
// still exist, read in tx. On PostgreSQL it locks their rows, in id
// order, as every transaction that writes them does (the flushers'
// counter updates, the retention purge): so none waits on another in a
// cycle; a batch bringing a link to RollUpAt waits for a purge's commit
// and then finds the clicks the purge added to its rollups gone; and two
// purges of one link's clicks take turns. SQLite has one writer: the rows
// read in this transaction stand.
func (db *DB) lockLinks(ctx context.Context, tx *sql.Tx, links []int64) (map[int64]bool, error) {
	rolled := make(map[int64]bool, len(links))
	for chunk := range slices.Chunk(links, 1000) {
		q := `SELECT id, rolled_up FROM links WHERE id IN (` + marks(len(chunk)) + `)`
		if db.dialect == DialectPostgres {
			q += ` ORDER BY id FOR UPDATE`
		}
		rows, err := tx.QueryContext(ctx, db.Rebind(q), anys(chunk)...)
		if err != nil {
			return nil, mapErr(err, "lock links")
		}
		for rows.Next() {
			var id, r int64
			if err := rows.Scan(&id, &r); err != nil {
				rows.Close()
				return nil, mapErr(err, "lock links")
			}
			rolled[id] = r == 1
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, mapErr(err, "lock links")
		}
	}
	return rolled, nil
}
