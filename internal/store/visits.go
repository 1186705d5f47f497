package store

import (
	"context"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.VisitStore = (*DB)(nil)

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
