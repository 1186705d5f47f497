package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

// runColumns is what every read of workflow_runs selects, in scanRun's
// order; insertRunQuery writes them in the same order (runArgs).
const runColumns = `id, workflow, version, user_id, status, data, position, seq, wait_event, wait_match, due_at, steps,
	event_id, created_at, updated_at`

const insertRunQuery = `INSERT INTO workflow_runs (` + runColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Runs pages: a limit of zero or less reads defaultRunsPage, at most
// maxRunsPage.
const (
	defaultRunsPage = 50
	maxRunsPage     = 1000
)

// Run implements workflow.Store.
func (db *DB) Run(ctx context.Context, id string) (workflow.Run, error) {
	r, err := scanRun(db.queryRow(ctx, `SELECT `+runColumns+` FROM workflow_runs WHERE id = ?`, id))
	if errNoRows(err) {
		return r, apperr.New(apperr.NotFound, "workflow run %q not found", id)
	}
	return r, mapErr(err, "get workflow run")
}

// Runs implements workflow.Store: newest first (created_at, then id, both
// descending), through the workflow's index, or the user's when f names
// one. The cursor is notify's opaque (time, id) token of the last run of
// the page before.
func (db *DB) Runs(ctx context.Context, f workflow.RunFilter, cursor string, limit int) ([]workflow.Run, string, error) {
	after, err := notify.DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = defaultRunsPage
	}
	limit = min(limit, maxRunsPage)
	var (
		where []string
		args  []any
	)
	for _, c := range []struct{ col, v string }{{"workflow", f.Workflow}, {"user_id", f.UserID}, {"status", string(f.Status)}} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	if !after.IsZero() {
		where, args = append(where, "(created_at, id) < (?, ?)"), append(args, after.At.UnixMicro(), after.ID)
	}
	q := `SELECT ` + runColumns + ` FROM workflow_runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	runs, err := db.scanRuns(ctx, "list workflow runs", q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		next = notify.EncodeCursor(notify.Cursor{At: last.CreatedAt, ID: last.ID})
	}
	return runs, next, nil
}

// liveRuns is the condition of the partial index of live runs,
// workflow_runs_live, written as the index says it: SQLite uses a partial
// index only for a query holding its condition as written.
const liveRuns = `status IN ('running', 'waiting')`

// WaitingRuns implements workflow.Store, through the index of live runs
// by user and awaited event: the lookup every event makes.
func (db *DB) WaitingRuns(ctx context.Context, userID, event string, now time.Time, limit int) ([]workflow.Run, error) {
	return db.scanRuns(ctx, "list waiting workflow runs", `SELECT `+runColumns+` FROM workflow_runs
		WHERE user_id = ? AND wait_event = ? AND `+liveRuns+` AND status = 'waiting' AND (due_at IS NULL OR due_at > ?)
		ORDER BY created_at, id LIMIT ?`, userID, event, now.UnixMicro(), limit)
}

// CountLiveRuns implements workflow.Store, from the index of live runs
// alone.
func (db *DB) CountLiveRuns(ctx context.Context, userID string) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM workflow_runs WHERE user_id = ? AND `+liveRuns, userID).Scan(&n)
	return n, mapErr(err, "count live workflow runs")
}

// ClaimDue implements workflow.Store in one statement: the due runs are
// picked through the due index, oldest first, and moved to the lease's
// end. On PostgreSQL the pick skips rows another claim has locked (FOR
// UPDATE SKIP LOCKED), so concurrent claims take different runs without
// waiting on each other; the pick is a materialized CTE so it runs once,
// whatever plan the UPDATE gets. SQLite runs one write at a time.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]workflow.Run, error) {
	lock := ""
	if db.dialect == DialectPostgres {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	q := `WITH due AS MATERIALIZED (SELECT id FROM workflow_runs WHERE due_at <= ? ORDER BY due_at LIMIT ?` + lock + `)
		UPDATE workflow_runs SET due_at = ?, seq = seq + 1 WHERE id IN (SELECT id FROM due) RETURNING ` + runColumns
	rows, err := db.write.QueryContext(ctx, db.Rebind(q), now.UnixMicro(), limit, now.Add(lease).UnixMicro())
	if err != nil {
		return nil, mapErr(err, "claim due workflow runs")
	}
	runs, err := readRuns(rows)
	return runs, mapErr(err, "claim due workflow runs")
}

// ClaimRun implements workflow.Store. A run another caller claimed is
// not due (its due_at is the claim's end): on PostgreSQL the UPDATE waits
// for that claim's commit and then finds the row no longer matching.
func (db *DB) ClaimRun(ctx context.Context, id string, now time.Time, lease time.Duration) (workflow.Run, bool, error) {
	r, err := scanRun(db.write.QueryRowContext(ctx, db.Rebind(`UPDATE workflow_runs SET due_at = ?, seq = seq + 1
		WHERE id = ? AND due_at <= ? RETURNING `+runColumns), now.Add(lease).UnixMicro(), id, now.UnixMicro()))
	if errNoRows(err) {
		return workflow.Run{}, false, nil
	}
	if err != nil {
		return workflow.Run{}, false, mapErr(err, "claim workflow run")
	}
	return r, true, nil
}

// updateRunQuery writes a run's moving parts while its seq is the
// caller's.
const updateRunQuery = `UPDATE workflow_runs SET status = ?, data = ?, position = ?, seq = ?, wait_event = ?, wait_match = ?,
	due_at = ?, steps = ?, updated_at = ? WHERE id = ? AND seq = ?`

// UpdateRun implements workflow.Store: one conditional UPDATE, group
// committed with other writes (the scheduler writes a run after every
// step). A final status clears DueAt.
func (db *DB) UpdateRun(ctx context.Context, r workflow.Run, seq int64) (workflow.Run, error) {
	r = normalRun(r)
	r.Seq = seq + 1
	steps, err := encodeSteps(r.Steps)
	if err != nil {
		return workflow.Run{}, err
	}
	changed, err := db.writeChanged(ctx, false, updateRunQuery, []any{string(r.Status), string(r.Data), r.Position, r.Seq,
		r.WaitEvent, string(r.WaitMatch), toMicros(r.DueAt), steps, r.UpdatedAt.UnixMicro(), r.ID, seq})
	if err != nil {
		return workflow.Run{}, mapErr(err, "update workflow run")
	}
	if changed {
		return r, nil
	}
	var n int
	if err := db.queryRow(ctx, `SELECT count(*) FROM workflow_runs WHERE id = ?`, r.ID).Scan(&n); err != nil {
		return workflow.Run{}, mapErr(err, "update workflow run")
	}
	if n == 0 {
		return workflow.Run{}, apperr.New(apperr.NotFound, "workflow run %q not found", r.ID)
	}
	return workflow.Run{}, apperr.New(apperr.Conflict, "workflow run %q moved on since seq %d", r.ID, seq)
}

// CountRuns implements workflow.Store.
func (db *DB) CountRuns(ctx context.Context) (map[string]map[workflow.Status]int64, error) {
	rows, err := db.query(ctx, `SELECT workflow, status, count(*) FROM workflow_runs WHERE `+liveRuns+` GROUP BY workflow, status`)
	if err != nil {
		return nil, mapErr(err, "count workflow runs")
	}
	defer rows.Close()
	out := map[string]map[workflow.Status]int64{}
	for rows.Next() {
		var (
			wf, status string
			n          int64
		)
		if err := rows.Scan(&wf, &status, &n); err != nil {
			return nil, mapErr(err, "count workflow runs")
		}
		if out[wf] == nil {
			out[wf] = map[workflow.Status]int64{}
		}
		out[wf][workflow.Status(status)] = n
	}
	return out, mapErr(rows.Err(), "count workflow runs")
}

// normalRun is r as stored: a final run is due never.
func normalRun(r workflow.Run) workflow.Run {
	if !r.Status.Live() {
		r.DueAt = time.Time{}
	}
	return r
}

// runArgs is r's row for insertRunQuery.
func runArgs(r workflow.Run) ([]any, error) {
	r = normalRun(r)
	steps, err := encodeSteps(r.Steps)
	if err != nil {
		return nil, err
	}
	return []any{r.ID, r.Workflow, r.Version, r.UserID, string(r.Status), string(r.Data), r.Position, r.Seq,
		r.WaitEvent, string(r.WaitMatch), toMicros(r.DueAt), steps, r.EventID, r.CreatedAt.UnixMicro(), r.UpdatedAt.UnixMicro()}, nil
}

func encodeSteps(steps []workflow.StepRecord) (string, error) {
	if len(steps) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return "", fmt.Errorf("encode workflow run steps: %w", err)
	}
	return string(b), nil
}

// scanRuns runs q, which selects runColumns, on the read pool.
func (db *DB) scanRuns(ctx context.Context, op, q string, args ...any) ([]workflow.Run, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, op)
	}
	runs, err := readRuns(rows)
	return runs, mapErr(err, op)
}

// readRuns reads and closes rows of runColumns.
func readRuns(rows *sql.Rows) ([]workflow.Run, error) {
	defer rows.Close()
	out := []workflow.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanRun reads one row of runColumns.
func scanRun(row interface{ Scan(...any) error }) (workflow.Run, error) {
	var (
		r                          workflow.Run
		status, data, match, steps string
		due                        *int64
		created, updated           int64
	)
	err := row.Scan(&r.ID, &r.Workflow, &r.Version, &r.UserID, &status, &data, &r.Position, &r.Seq, &r.WaitEvent, &match,
		&due, &steps, &r.EventID, &created, &updated)
	if err != nil {
		return workflow.Run{}, err
	}
	r.Status, r.Data, r.DueAt = workflow.Status(status), json.RawMessage(data), fromMicros(due)
	if match != "" {
		r.WaitMatch = json.RawMessage(match)
	}
	r.CreatedAt, r.UpdatedAt = fromMicros(&created), fromMicros(&updated)
	if err := json.Unmarshal([]byte(steps), &r.Steps); err != nil {
		return workflow.Run{}, fmt.Errorf("decode steps of workflow run %q: %w", r.ID, err)
	}
	return r, nil
}
