package store

import (
	"context"
	"database/sql"
	"math"
	"sync"
	"time"
)

// purgeClockSkew is how far behind another node's clock a node's may be
// when it creates a link. Link ids are handed out in order, so a link's
// created_at is at least that of every earlier link less this skew: past a
// link created purgeClockSkew after the cutoff, no link is older than the
// cutoff, and the purge's walk can end there.
const purgeClockSkew = time.Hour

// purgeEnds remembers, for one sweep's cutoff, the id past which no link is
// older than the cutoff (PurgeClicks is called with one cutoff for a whole
// sweep, from the first link to the last).
type purgeEnds struct {
	mu     sync.Mutex
	cutoff int64
	end    int64
}

// purgeEnd returns the id from which on every link was created after
// cutoff (math.MaxInt64 when it may be none), found once per cutoff.
// Without it, the walk's last call would read every newer link, the whole
// table's tail, to find none old enough: at ten million links one long
// transaction per sweep.
func (db *DB) purgeEnd(ctx context.Context, tx *sql.Tx, from, cutoff int64) (int64, error) {
	db.purgeEnds.mu.Lock()
	defer db.purgeEnds.mu.Unlock()
	if db.purgeEnds.end != 0 && db.purgeEnds.cutoff == cutoff {
		return db.purgeEnds.end, nil
	}
	end, err := db.firstLinkCreatedFrom(ctx, tx, from, cutoff+purgeClockSkew.Microseconds())
	if err != nil {
		return 0, err
	}
	db.purgeEnds.cutoff, db.purgeEnds.end = cutoff, end
	return end, nil
}

// firstLinkCreatedFrom bisects the links' primary key from the id from for
// the first link created at t or later, assuming created_at grows with the
// id, and returns its id, or math.MaxInt64 when even the newest link is
// older. Where the assumption fails by up to purgeClockSkew the answer is
// still a link created at t or later, which is all the purge needs. It
// costs about log2(ids) lookups by the primary key.
func (db *DB) firstLinkCreatedFrom(ctx context.Context, tx *sql.Tx, from, t int64) (int64, error) {
	at := func(id int64) (first, created int64, found bool, err error) {
		err = tx.QueryRowContext(ctx, db.Rebind(`SELECT id, created_at FROM links WHERE id >= ? ORDER BY id LIMIT 1`), id).Scan(&first, &created)
		if err == sql.ErrNoRows {
			return 0, 0, false, nil
		}
		return first, created, err == nil, mapErr(err, "purge clicks")
	}
	var newest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM links`).Scan(&newest); err != nil {
		return 0, mapErr(err, "purge clicks")
	}
	if !newest.Valid || newest.Int64 < from {
		return math.MaxInt64, nil
	}
	_, created, _, err := at(newest.Int64)
	if err != nil || created < t {
		return math.MaxInt64, err
	}
	// end is created at t or later; the first such link is in [lo, hi) or
	// is end.
	end, lo, hi := newest.Int64, from, newest.Int64
	for lo < hi {
		mid := lo + (hi-lo)/2
		id, created, found, err := at(mid)
		switch {
		case err != nil:
			return 0, err
		case !found || id >= end:
			hi = mid // nothing between mid and end
		case created >= t:
			end, hi = id, mid
		default:
			lo = id + 1
		}
	}
	return end, nil
}
