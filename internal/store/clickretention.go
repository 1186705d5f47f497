package store

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.ClickRetentionStore = (*DB)(nil)

// purgeLinksPerCall bounds the links one PurgeClicks call looks at.
const purgeLinksPerCall = 200

// PurgeClicks implements shorten.ClickRetentionStore. It walks the links
// in id order from the id from, 200 a call, and deletes each one's clicks
// older than before through link_clicks_link_at (a range of the index per
// link: no scan of the table and no index on time alone, which every click
// would pay for). Links created after before are skipped: their clicks are
// newer, and the walk ends at the first link created an hour after before
// (purgeend.go). Rollups and conversions are kept; a link below RollUpAt hits,
// whose rollups do not count its raw clicks, first has the clicks about to
// go added to its rollups, so its stats keep them (linkrollups.go).
//
// A call counts each link's old clicks (one index-only statement), then
// deletes those of every link they all fit in limit with in one statement
// (two: those below RollUpAt return theirs). The first link that does not
// fit gives its oldest clicks up to the limit, and the next call starts
// there. Most links are opened a few times, so a sweep costs a handful of
// statements per 200 links instead of one per link.
//
// Concurrent calls on nodes sharing PostgreSQL are safe: each locks the
// links whose clicks it deletes, in id order as the flushers' counter
// updates do, so two purges of one link's clicks take turns and no wait
// can form a cycle; the second finds the clicks gone.
func (db *DB) PurgeClicks(ctx context.Context, before time.Time, from int64, limit int) (deleted int, next int64, err error) {
	cutoff := before.UnixMicro()
	err = db.backgroundTx(ctx, func(tx *sql.Tx) error {
		deleted = 0
		end, err := db.purgeEnd(ctx, tx, from, cutoff)
		if err != nil {
			return err
		}
		ids, err := db.int64s(ctx, tx, `SELECT id FROM links
			WHERE id >= ? AND id < ? AND created_at < ? AND (clicks > 0 OR bot_hits > 0) ORDER BY id LIMIT ?`, from, end, cutoff, purgeLinksPerCall)
		if err != nil || len(ids) == 0 {
			next = 0
			return err
		}
		old, err := db.oldClicks(ctx, tx, ids, cutoff)
		if err != nil {
			return err
		}
		p := planPurge(ids, old, limit, len(ids) == purgeLinksPerCall)
		next = p.next
		touched := p.whole
		if p.partial != 0 {
			touched = append(slices.Clip(touched), p.partial)
		}
		rolled, err := db.lockLinks(ctx, tx, touched)
		if err != nil {
			return err
		}
		var rolledUp, below []int64 // the whole links, by which side of RollUpAt they are on
		for _, id := range p.whole {
			switch r, ok := rolled[id]; {
			case !ok: // deleted meanwhile
			case r:
				rolledUp = append(rolledUp, id)
			default:
				below = append(below, id)
			}
		}
		del := func(links []int64) string {
			return db.Rebind(`DELETE FROM link_clicks WHERE link_id IN (` + marks(len(links)) + `) AND at < ?`)
		}
		var purged []shorten.Click
		if len(rolledUp) > 0 {
			res, err := tx.ExecContext(ctx, del(rolledUp), append(anys(rolledUp), cutoff)...)
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			n, err := res.RowsAffected()
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			deleted += int(n)
		}
		if len(below) > 0 {
			rows, err := tx.QueryContext(ctx, del(below)+" RETURNING link_id, "+rawClickColumns, append(anys(below), cutoff)...)
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			clicks, err := scanRawClicks(rows, 0)
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			purged = append(purged, clicks...)
			deleted += len(clicks)
		}
		if r, ok := rolled[p.partial]; ok {
			clicks, n, err := db.purgeOldest(ctx, tx, p.partial, cutoff, p.left, !r)
			if err != nil {
				return err
			}
			purged = append(purged, clicks...)
			deleted += n
		}
		r := newRollups(purged)
		up := rowStmts{m: rollupRows, owner: db}
		return mapErr(up.exec(ctx, tx, len(r.keys), rollupParams, r.args), "purge clicks")
	})
	if err != nil {
		return 0, 0, err
	}
	return deleted, next, nil
}

// purgePlan is what one PurgeClicks call deletes: every old click of the
// links whole, the oldest left of partial's (0: none), and where the next
// call starts (0: the sweep is over).
type purgePlan struct {
	whole   []int64
	partial int64
	left    int
	next    int64
}

// planPurge takes links, in id order, whole while their old clicks (old)
// fit in limit; full says the links were a whole page, so more may follow.
func planPurge(links []int64, old map[int64]int, limit int, full bool) purgePlan {
	var p purgePlan
	left := limit
	for _, id := range links {
		n := old[id]
		switch {
		case n == 0:
			continue
		case left == 0:
			p.next = id
			return p
		case n > left:
			p.partial, p.left, p.next = id, left, id
			return p
		}
		p.whole = append(p.whole, id)
		left -= n
	}
	if full {
		p.next = links[len(links)-1] + 1
	}
	return p
}

// oldClicks counts each link's clicks before cutoff, from the index alone.
func (db *DB) oldClicks(ctx context.Context, tx *sql.Tx, links []int64, cutoff int64) (map[int64]int, error) {
	rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT link_id, COUNT(*) FROM link_clicks
		WHERE link_id IN (`+marks(len(links))+`) AND at < ? GROUP BY link_id`), append(anys(links), cutoff)...)
	if err != nil {
		return nil, mapErr(err, "purge clicks")
	}
	defer rows.Close()
	old := make(map[int64]int, len(links))
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, mapErr(err, "purge clicks")
		}
		old[id] = n
	}
	return old, mapErr(rows.Err(), "purge clicks")
}

// purgeOldest deletes the link's oldest up to n clicks before cutoff, by
// the newest time among them (ties at that time go too, so it may delete a
// few more), and returns them when returning (a link below RollUpAt, for
// its rollups), and how many went.
func (db *DB) purgeOldest(ctx context.Context, tx *sql.Tx, link, cutoff int64, n int, returning bool) ([]shorten.Click, int, error) {
	del := db.Rebind(`DELETE FROM link_clicks WHERE link_id = ? AND at < ? AND at <= (SELECT MAX(at) FROM
		(SELECT at FROM link_clicks WHERE link_id = ? AND at < ? ORDER BY at LIMIT ?) AS oldest)`)
	if returning {
		rows, err := tx.QueryContext(ctx, del+" RETURNING "+rawClickColumns, link, cutoff, link, cutoff, n)
		if err != nil {
			return nil, 0, mapErr(err, "purge clicks")
		}
		clicks, err := scanRawClicks(rows, link)
		return clicks, len(clicks), mapErr(err, "purge clicks")
	}
	res, err := tx.ExecContext(ctx, del, link, cutoff, link, cutoff, n)
	if err != nil {
		return nil, 0, mapErr(err, "purge clicks")
	}
	affected, err := res.RowsAffected()
	return nil, int(affected), mapErr(err, "purge clicks")
}

// LinkVisitors counts the distinct visitors among a link's raw clicks in
// [since, until), rows from before migration 0019 (the hash as text in
// visitor) and after it (its bytes in visitor_id) alike.
func (db *DB) LinkVisitors(ctx context.Context, linkID int64, since, until time.Time) (int64, error) {
	hexID := "lower(hex(visitor_id))" // hex(NULL) is '' on SQLite, hence the CASE
	if db.dialect == DialectPostgres {
		hexID = "encode(visitor_id, 'hex')"
	}
	var n int64
	err := db.queryRow(ctx, `SELECT COUNT(DISTINCT CASE WHEN visitor_id IS NULL THEN visitor ELSE `+hexID+` END) FROM link_clicks
		WHERE link_id = ? AND at >= ? AND at < ?`, linkID, since.UnixMicro(), until.UnixMicro()).Scan(&n)
	return n, mapErr(err, "count link visitors")
}

// int64s runs a query in tx whose rows are one integer each.
func (db *DB) int64s(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, db.Rebind(query), args...)
	if err != nil {
		return nil, mapErr(err, "read ids")
	}
	return appendRows(nil, rows, "read ids", func(row rowScanner) (v int64, err error) { return v, row.Scan(&v) })
}
