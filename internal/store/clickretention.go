package store

import (
	"context"
	"database/sql"
	"errors"
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
		var ids []int64
		unrolled := map[int64]bool{}
		for rows.Next() {
			var id, rolled int64
			if err := rows.Scan(&id, &rolled); err != nil {
				rows.Close()
				return mapErr(err, "purge clicks")
			}
			ids = append(ids, id)
			unrolled[id] = rolled == 0
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr(err, "purge clicks")
		}
		// The oldest up to n clicks of the link, by the newest time among
		// them (ties at that time go too, so a call may delete a few more
		// than limit).
		const oldest = ` FROM link_clicks WHERE link_id = ? AND at < ? AND at <= (SELECT MAX(at) FROM
			(SELECT at FROM link_clicks WHERE link_id = ? AND at < ? ORDER BY at LIMIT ?) AS oldest)`
		del := db.Rebind(`DELETE` + oldest)
		for _, id := range ids {
			left := limit - deleted
			if unrolled[id] {
				if err := db.rollUpPurged(ctx, tx, id, `SELECT `+rawClickColumns+oldest, id, cutoff, id, cutoff, left); err != nil {
					return err
				}
			}
			res, err := tx.ExecContext(ctx, del, id, cutoff, id, cutoff, left)
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			n, err := res.RowsAffected()
			if err != nil {
				return mapErr(err, "purge clicks")
			}
			deleted += int(n)
			if int(n) >= left {
				next = id // this link may have more: start there next time
				return nil
			}
		}
		if len(ids) == purgeLinksPerCall {
			next = ids[len(ids)-1] + 1
		}
		return nil
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

// rollUpPurged adds to the rollups of link, below RollUpAt hits, the
// clicks query (with args) selects, which the purge is about to delete.
// On PostgreSQL the link's row is locked first, as a flusher's counter
// update locks it, so that a batch bringing the link to RollUpAt meanwhile
// cannot roll up the same clicks again.
func (db *DB) rollUpPurged(ctx context.Context, tx *sql.Tx, link int64, query string, args ...any) error {
	lock := `SELECT rolled_up FROM links WHERE id = ?`
	if db.dialect == DialectPostgres {
		lock += ` FOR UPDATE`
	}
	var rolled int64
	err := tx.QueryRowContext(ctx, db.Rebind(lock), link).Scan(&rolled)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && rolled == 1) {
		return nil // deleted meanwhile, with its clicks; or rolled up meanwhile
	}
	if err != nil {
		return mapErr(err, "purge clicks")
	}
	rows, err := tx.QueryContext(ctx, db.Rebind(query), args...)
	if err != nil {
		return mapErr(err, "purge clicks")
	}
	clicks, err := scanRawClicks(rows, link)
	if err != nil {
		return mapErr(err, "purge clicks")
	}
	r := newRollups(clicks)
	up := rowStmts{m: rollupRows, owner: db}
	return mapErr(up.exec(ctx, tx, len(r.keys), rollupParams, r.args), "purge clicks")
}
