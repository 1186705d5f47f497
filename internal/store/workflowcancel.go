package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

// canceledOutcome is the outcome recorded on the step a cancel ended.
const canceledOutcome = "canceled"

// CancelRuns implements workflow.Store, in one transaction: the runs are
// read under their row locks (PostgreSQL; SQLite's transaction holds the
// write lock), so a run the scheduler or an event moves meanwhile is
// either canceled after that write or not live any more.
func (db *DB) CancelRuns(ctx context.Context, wf, userID, runID string, now time.Time) ([]string, error) {
	if userID == "" && runID == "" {
		return nil, apperr.New(apperr.Invalid, "cancel workflow runs: name a user or a run")
	}
	return db.cancelRuns(ctx, runScope{workflow: wf, userID: userID, runID: runID}, now)
}

// runScope picks the live runs of a workflow a cancel ends: those of
// userID, or the run runID (empty: any), of a version up to maxVersion
// (0: any), at most limit of them (0: all).
type runScope struct {
	workflow, userID, runID string
	maxVersion, limit       int
}

// cancelRuns cancels the live runs in sc and returns their ids. Each
// run's open step (the last, when running or waiting) ends canceled; a
// run between steps gets a canceled record of the step it was to run.
func (db *DB) cancelRuns(ctx context.Context, sc runScope, now time.Time) ([]string, error) {
	q := `SELECT ` + runColumns + ` FROM workflow_runs WHERE workflow = ? AND ` + liveRuns
	args := []any{sc.workflow}
	if sc.userID != "" {
		q, args = q+` AND user_id = ?`, append(args, sc.userID)
	}
	if sc.runID != "" {
		q, args = q+` AND id = ?`, append(args, sc.runID)
	}
	if sc.maxVersion > 0 {
		q, args = q+` AND version <= ?`, append(args, sc.maxVersion)
	}
	q += ` ORDER BY id`
	if sc.limit > 0 {
		q, args = q+` LIMIT ?`, append(args, sc.limit)
	}
	q += db.forUpdate()
	ids := []string{}
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, db.Rebind(q), args...)
		if err != nil {
			return err
		}
		runs, err := readRuns(rows)
		if err != nil {
			return err
		}
		kinds := map[int]stepKinds{} // by version
		for _, r := range runs {
			k, ok := kinds[r.Version]
			if !ok {
				k = db.stepKindsOf(ctx, tx, r.Workflow, r.Version)
				kinds[r.Version] = k
			}
			steps, err := encodeSteps(canceledSteps(r, k, now))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE workflow_runs SET status = 'canceled', due_at = NULL, seq = seq + 1,
				steps = ?, updated_at = ? WHERE id = ?`), steps, now.UnixMicro(), r.ID); err != nil {
				return err
			}
			ids = append(ids, r.ID)
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err, "cancel workflow runs")
	}
	return ids, nil
}

// canceledSteps is r's steps with the open one ended canceled, or a
// canceled record of the step at r.Position appended.
func canceledSteps(r workflow.Run, k stepKinds, now time.Time) []workflow.StepRecord {
	steps := r.Steps
	if n := len(steps); n > 0 && (steps[n-1].Status == "running" || steps[n-1].Status == "waiting") {
		steps[n-1].Status, steps[n-1].EndedAt, steps[n-1].Outcome = string(workflow.StatusCanceled), now, canceledOutcome
		return steps
	}
	rec := workflow.StepRecord{Index: r.Position, Kind: "cancel", Status: string(workflow.StatusCanceled),
		StartedAt: now, EndedAt: now, Outcome: canceledOutcome}
	if r.Position >= 0 && r.Position < len(k) {
		rec.Name, rec.Kind = k[r.Position].Name, k[r.Position].Kind
	}
	return append(steps, rec)
}

// stepKinds is the name and kind of each step of a definition.
type stepKinds []struct{ Name, Kind string }

// stepKindsOf reads the steps of one version of a workflow for the
// records a cancel appends; none when it cannot (the record then says
// kind "cancel").
func (db *DB) stepKindsOf(ctx context.Context, tx *sql.Tx, key string, version int) stepKinds {
	var def string
	if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT definition FROM workflow_versions WHERE key = ? AND version = ?`),
		key, version).Scan(&def); err != nil {
		return nil
	}
	var d struct {
		Steps []map[string]json.RawMessage `json:"steps"`
	}
	if json.Unmarshal([]byte(def), &d) != nil {
		return nil
	}
	out := make(stepKinds, len(d.Steps))
	for i, s := range d.Steps {
		_ = json.Unmarshal(s["name"], &out[i].Name)
		for _, kind := range []string{"send", "wait", "wait_for", "branch", "split", "exit"} {
			if _, ok := s[kind]; ok {
				out[i].Kind = kind
			}
		}
	}
	return out
}
