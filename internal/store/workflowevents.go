package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

const eventColumns = `id, request_id, name, user_id, data, hash, runs_started, runs_resumed, created_at`

// EventByRequestID implements workflow.Store.
func (db *DB) EventByRequestID(ctx context.Context, requestID string) (workflow.Event, error) {
	e, err := scanEvent(db.queryRow(ctx, `SELECT `+eventColumns+` FROM workflow_events WHERE request_id = ?`, requestID))
	if errNoRows(err) {
		return e, apperr.New(apperr.NotFound, "no event with request_id %q", requestID)
	}
	return e, mapErr(err, "get workflow event")
}

// entryLockKey is the first key of the PostgreSQL advisory lock that
// serializes a user's entries into workflows ("wflw"); the second is a
// hash of the schema and the user.
const entryLockKey = 0x77666c77

// RecordEvent implements workflow.Store, in one transaction group
// committed with other writes:
//
//  1. the event goes in unless its request_id is taken (ON CONFLICT DO
//     NOTHING waits for a concurrent insert of the same id to commit, so
//     of two concurrent requests one saves and the other reads its answer);
//  2. each run of start goes in while its workflow is live (a shared lock
//     on the workflow's row, which DeleteWorkflow takes exclusively) and,
//     under entry.once_per, no run of that workflow for that user was
//     created within oncePer: a conditional INSERT run after taking a
//     transaction-scoped advisory lock on the user (PostgreSQL; SQLite
//     runs one write at a time). Under READ COMMITTED each statement reads
//     what committed before it began, so the check after the lock sees the
//     run of any event for the user that held the lock before;
//  3. each resume is written only while the run's seq is the one read
//     (a conditional UPDATE, in run id order so two events resuming the
//     same runs lock them in one order);
//  4. the event's answer (runs started and resumed) is saved on it.
func (db *DB) RecordEvent(ctx context.Context, e workflow.Event, start []workflow.Run, oncePer map[string]time.Duration,
	resume []workflow.Resume) (workflow.Event, bool, error) {
	starts := make([][]any, len(start))
	for i, r := range start {
		args, err := runArgs(r)
		if err != nil {
			return workflow.Event{}, false, err
		}
		starts[i] = args
	}
	resume = slices.SortedFunc(slices.Values(resume), func(a, b workflow.Resume) int { return cmp.Compare(a.Run.ID, b.Run.ID) })
	resumes := make([][]any, len(resume))
	for i, rs := range resume {
		r := normalRun(rs.Run)
		steps, err := encodeSteps(r.Steps)
		if err != nil {
			return workflow.Event{}, false, err
		}
		resumes[i] = []any{string(r.Status), string(r.Data), r.Position, rs.Seq + 1, r.WaitEvent, string(r.WaitMatch),
			toMicros(r.DueAt), steps, r.UpdatedAt.UnixMicro(), r.ID, rs.Seq}
	}
	var (
		saved   workflow.Event
		created bool
	)
	record := func(ctx context.Context, tx *sql.Tx) error {
		saved, created = e, false // run again alone if its batch fails
		saved.RunsStarted, saved.RunsResumed = []string{}, []string{}
		var reqID any
		if e.RequestID != "" {
			reqID = e.RequestID
		}
		res, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO workflow_events (`+eventColumns+`) VALUES (?, ?, ?, ?, ?, ?, '[]', '[]', ?)
			ON CONFLICT (request_id) DO NOTHING`), e.ID, reqID, e.Name, e.UserID, string(e.Data), e.Hash, e.CreatedAt.UnixMicro())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				saved, err = scanEvent(tx.QueryRowContext(ctx, db.Rebind(`SELECT `+eventColumns+` FROM workflow_events WHERE request_id = ?`), e.RequestID))
			}
			return err
		}
		created = true
		for i, r := range start {
			ok, err := db.startRun(ctx, tx, r, oncePer[r.Workflow], starts[i])
			if err != nil {
				return err
			}
			if ok {
				saved.RunsStarted = append(saved.RunsStarted, r.ID)
			}
		}
		for i, rs := range resume {
			res, err := tx.ExecContext(ctx, db.Rebind(updateRunQuery), resumes[i]...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				saved.RunsResumed = append(saved.RunsResumed, rs.Run.ID)
			}
		}
		started, _ := json.Marshal(saved.RunsStarted)
		resumed, _ := json.Marshal(saved.RunsResumed)
		_, err = tx.ExecContext(ctx, db.Rebind(`UPDATE workflow_events SET runs_started = ?, runs_resumed = ? WHERE id = ?`),
			string(started), string(resumed), e.ID)
		return err
	}
	var err error
	for range 3 { // a deadlock between two events' locks: run again
		if err = db.batch(ctx, record); !isConflict(err) {
			break
		}
	}
	if err != nil {
		return workflow.Event{}, false, mapErr(err, "record workflow event")
	}
	return saved, created, nil
}

// startRun inserts run r (its row args) unless its workflow is deleted
// or, with oncePer, its user entered the workflow within oncePer of
// r.CreatedAt. It reports whether it inserted.
func (db *DB) startRun(ctx context.Context, tx *sql.Tx, r workflow.Run, oncePer time.Duration, args []any) (bool, error) {
	live := `SELECT count(*) FROM workflows WHERE key = ? AND deleted = 0`
	if db.dialect == DialectPostgres {
		// FOR KEY SHARE: the weakest lock that DeleteWorkflow's FOR
		// UPDATE waits for (and that concurrent events share).
		live = `SELECT count(*) FROM (SELECT 1 FROM workflows WHERE key = ? AND deleted = 0 FOR KEY SHARE) w`
	}
	var n int
	if err := tx.QueryRowContext(ctx, db.Rebind(live), r.Workflow).Scan(&n); err != nil || n == 0 {
		return false, err
	}
	if oncePer <= 0 {
		_, err := tx.ExecContext(ctx, db.Rebind(insertRunQuery), args...)
		return err == nil, err
	}
	if db.dialect == DialectPostgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || ':' || $2))`,
			entryLockKey, r.UserID); err != nil {
			return false, err
		}
	}
	q := `INSERT INTO workflow_runs (` + runColumns + `) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM workflow_runs WHERE user_id = ? AND workflow = ? AND created_at > ?)`
	res, err := tx.ExecContext(ctx, db.Rebind(q), append(args, r.UserID, r.Workflow, r.CreatedAt.Add(-oncePer).UnixMicro())...)
	if err != nil {
		return false, err
	}
	n64, err := res.RowsAffected()
	return n64 > 0, err
}

func scanEvent(row interface{ Scan(...any) error }) (workflow.Event, error) {
	var (
		e                  workflow.Event
		reqID              *string
		data, started, res string
		at                 int64
	)
	if err := row.Scan(&e.ID, &reqID, &e.Name, &e.UserID, &data, &e.Hash, &started, &res, &at); err != nil {
		return workflow.Event{}, err
	}
	if reqID != nil {
		e.RequestID = *reqID
	}
	e.Data, e.CreatedAt = json.RawMessage(data), fromMicros(&at)
	if err := json.Unmarshal([]byte(started), &e.RunsStarted); err != nil {
		return workflow.Event{}, fmt.Errorf("decode runs started by event %q: %w", e.ID, err)
	}
	if err := json.Unmarshal([]byte(res), &e.RunsResumed); err != nil {
		return workflow.Event{}, fmt.Errorf("decode runs resumed by event %q: %w", e.ID, err)
	}
	return e, nil
}
