package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"slices"
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

// DeleteUnusedWorkflowVersions implements workflow.Store: it deletes the
// versions that stopped being current before t (a later version was put
// before t, or the key was deleted before t) and that no live run is on,
// limit to a transaction, then the rows of keys deleted before t left
// without a version, and returns how many versions it deleted. The
// versions live runs are on are read once, from the live runs (a read of
// each, as the runs gauge makes), not per version.
func (db *DB) DeleteUnusedWorkflowVersions(ctx context.Context, t time.Time, limit int) (int, error) {
	type version struct {
		key string
		n   int
	}
	scan := func(r rowScanner) (version, error) {
		var v version
		err := r.Scan(&v.key, &v.n)
		return v, err
	}
	rows, err := db.query(ctx, `SELECT DISTINCT workflow, version FROM workflow_runs WHERE `+liveRuns)
	if err != nil {
		return 0, mapErr(err, "read the workflow versions in use")
	}
	used, err := appendRows(nil, rows, "read the workflow versions in use", scan)
	if err != nil {
		return 0, err
	}
	at := t.UnixMicro()
	rows, err = db.query(ctx, `SELECT v.key, v.version FROM workflow_versions v JOIN workflows w ON w.key = v.key
		WHERE (w.deleted = 1 AND w.updated_at < ?) OR (v.version < w.version AND EXISTS
			(SELECT 1 FROM workflow_versions n WHERE n.key = v.key AND n.version > v.version AND n.updated_at < ?))
		ORDER BY v.key, v.version`, at, at)
	if err != nil {
		return 0, mapErr(err, "read old workflow versions")
	}
	old, err := appendRows(nil, rows, "read old workflow versions", scan)
	if err != nil {
		return 0, err
	}
	inUse := make(map[version]bool, len(used))
	for _, v := range used {
		inUse[v] = true
	}
	old = slices.DeleteFunc(old, func(v version) bool { return inUse[v] })
	deleted := 0
	for len(old) > 0 && ctx.Err() == nil {
		chunk := old[:min(limit, len(old))]
		old = old[len(chunk):]
		err := db.backgroundTx(ctx, func(tx *sql.Tx) error {
			for _, v := range chunk {
				if _, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM workflow_versions WHERE key = ? AND version = ?`), v.key, v.n); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return deleted, mapErr(err, "delete old workflow versions")
		}
		deleted += len(chunk)
	}
	_, err = db.backgroundExec(ctx, `DELETE FROM workflows WHERE deleted = 1 AND updated_at < ?
		AND NOT EXISTS (SELECT 1 FROM workflow_versions v WHERE v.key = workflows.key)`, at)
	return deleted, mapErr(err, "delete deleted workflows")
}

// CountWorkflowVersions implements workflow.Store: the versions of key
// stored, through the primary key.
func (db *DB) CountWorkflowVersions(ctx context.Context, key string) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM workflow_versions WHERE key = ?`, key).Scan(&n)
	return n, mapErr(err, "count workflow versions")
}
