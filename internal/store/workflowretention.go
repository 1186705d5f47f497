package store

import (
	"context"
	"encoding/hex"
	"time"
)

// endedRuns is the condition of the partial index of runs that ended,
// workflow_runs_ended (migration 0033), written as the index says it.
const endedRuns = `status IN ('completed', 'canceled', 'failed')`

// DeleteWorkflowEventsBefore implements workflow.Store: it deletes up to limit
// events taken in before t, oldest first, and returns how many. Event ids
// sort by the millisecond they were made (notify.NewID), so the oldest
// are found by walking the primary key up to the id of t's millisecond:
// no index of their own. created_at is checked too, so an id of another
// form is never deleted early.
func (db *DB) DeleteWorkflowEventsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	res, err := db.backgroundExec(ctx, `DELETE FROM workflow_events WHERE id IN (SELECT id FROM workflow_events
		WHERE id < ? AND created_at < ? ORDER BY id LIMIT ?)`, idBefore("evt_", t), t.UnixMicro(), limit)
	if err != nil {
		return 0, mapErr(err, "delete old workflow events")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "delete old workflow events")
}

// DeleteEndedRunsBefore implements workflow.Store: it deletes up to limit
// runs that ended (completed, canceled or failed) before t, the oldest
// first, through the index of ended runs; a live run is never deleted.
func (db *DB) DeleteEndedRunsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	res, err := db.backgroundExec(ctx, `DELETE FROM workflow_runs WHERE id IN (SELECT id FROM workflow_runs
		WHERE `+endedRuns+` AND updated_at < ? ORDER BY updated_at LIMIT ?)`, t.UnixMicro(), limit)
	if err != nil {
		return 0, mapErr(err, "delete ended workflow runs")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "delete ended workflow runs")
}

// idBefore is the smallest id notify.NewID makes with prefix at t's
// millisecond: every id made before that millisecond sorts below it.
func idBefore(prefix string, t time.Time) string {
	var b [6]byte
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return prefix + hex.EncodeToString(b[:])
}
