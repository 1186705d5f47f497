package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.ClickRetentionStore = (*DB)(nil)

// purgeLinksPerCall bounds the links one PurgeClicks call looks at.
const purgeLinksPerCall = 200

// PurgeClicks implements shorten.ClickRetentionStore. It walks the links
// in id order from the id from, 200 a call, and deletes each one's clicks older than before
// through link_clicks_link_at (a range of the index per link: no scan of
// the table and no index on time alone, which every click would pay for),
// so a sweep costs one index probe per link that has clicks plus the rows
// it deletes. Links created after before are skipped: their clicks are
// newer. Rollups and conversions are kept; a link below RollUpAt hits,
// whose rollups do not count its raw clicks, first has the clicks about to
// go added to its rollups, so its stats keep them (linkrollups.go).
//
// Concurrent calls on nodes sharing PostgreSQL are safe: a row two nodes
// both delete is deleted once (the second waits on the first's row lock,
// then finds it gone), and links are visited in the same order, so the
// waits cannot form a cycle.
func (db *DB) PurgeClicks(ctx context.Context, before time.Time, from int64, limit int) (deleted int, next int64, err error) {
	cutoff := before.UnixMicro()
	err = db.backgroundTx(ctx, func(tx *sql.Tx) error {
		deleted, next = 0, 0
		rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT id, rolled_up FROM links
			WHERE id >= ? AND created_at < ? AND (clicks > 0 OR bot_hits > 0) ORDER BY id LIMIT ?`), from, cutoff, purgeLinksPerCall)
		if err != nil {
			return mapErr(err, "purge clicks")
		}
		var ids, below []int64
		for rows.Next() {
			var id, rolled int64
			if err := rows.Scan(&id, &rolled); err != nil {
				rows.Close()
				return mapErr(err, "purge clicks")
			}
			ids = append(ids, id)
			if rolled == 0 {
				below = append(below, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr(err, "purge clicks")
		}
		unrolled, err := db.lockUnrolled(ctx, tx, below)
		if err != nil {
			return err
		}
		// The oldest up to n clicks of the link, by the newest time among
		// them (ties at that time go too, so a call may delete a few more
		// than limit). A link below RollUpAt has the deleted clicks
		// returned, for its rollups.
		del := db.Rebind(`DELETE FROM link_clicks WHERE link_id = ? AND at < ? AND at <= (SELECT MAX(at) FROM
			(SELECT at FROM link_clicks WHERE link_id = ? AND at < ? ORDER BY at LIMIT ?) AS oldest)`)
		var purged []shorten.Click
		next = -1
		for _, id := range ids {
			left := limit - deleted
			var n int
			if unrolled[id] {
				rows, err := tx.QueryContext(ctx, del+" RETURNING "+rawClickColumns, id, cutoff, id, cutoff, left)
				if err != nil {
					return mapErr(err, "purge clicks")
				}
				clicks, err := scanRawClicks(rows, id)
				if err != nil {
					return mapErr(err, "purge clicks")
				}
				purged = append(purged, clicks...)
				n = len(clicks)
			} else {
				res, err := tx.ExecContext(ctx, del, id, cutoff, id, cutoff, left)
				if err != nil {
					return mapErr(err, "purge clicks")
				}
				affected, err := res.RowsAffected()
				if err != nil {
					return mapErr(err, "purge clicks")
				}
				n = int(affected)
			}
			deleted += n
			if n >= left {
				next = id // this link may have more: start there next time
				break
			}
		}
		if next == -1 {
			next = 0
			if len(ids) == purgeLinksPerCall {
				next = ids[len(ids)-1] + 1
			}
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

// lockUnrolled returns which of links, read as below RollUpAt, still
// are. On PostgreSQL it locks their rows, in id order as flushers lock
// them, so that a batch bringing one to RollUpAt cannot roll up the
// clicks the purge is adding to its rollups: it waits for the purge's
// commit and then finds them gone. SQLite has one writer: the rows read
// in this transaction stand.
func (db *DB) lockUnrolled(ctx context.Context, tx *sql.Tx, links []int64) (map[int64]bool, error) {
	unrolled := map[int64]bool{}
	if len(links) == 0 || db.dialect != DialectPostgres {
		for _, id := range links {
			unrolled[id] = true
		}
		return unrolled, nil
	}
	args := make([]any, len(links))
	for i, id := range links {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT id FROM links WHERE id IN (?`+strings.Repeat(", ?", len(links)-1)+`)
		AND rolled_up = 0 ORDER BY id FOR UPDATE`), args...)
	if err != nil {
		return nil, mapErr(err, "purge clicks")
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr(err, "purge clicks")
		}
		unrolled[id] = true
	}
	return unrolled, mapErr(rows.Err(), "purge clicks")
}
