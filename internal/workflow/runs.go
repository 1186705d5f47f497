package workflow

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// RunView is a run as the API shows it. Its JSON: {"id", "workflow",
// "version", "user_id", "status", "data", "steps": [{"index", "name",
// "kind", "status", "started_at", "ended_at", "notification_id",
// "outcome"}], "waiting_for": {"event", "match", "until"}, "created_at",
// "updated_at"}; a step's name, ended_at, notification_id and outcome are
// left out when it has none (and "until", "attempts" shown when it has
// them), and waiting_for only while the run waits.
type RunView struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	Version    int             `json:"version"`
	UserID     string          `json:"user_id"`
	Status     Status          `json:"status"`
	Data       json.RawMessage `json:"data"`
	Steps      []StepRecord    `json:"steps"`
	WaitingFor *WaitingFor     `json:"waiting_for,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// WaitingFor is what a waiting run waits for: an event (empty for a
// wait step) matching Match, until Until (zero: no deadline).
type WaitingFor struct {
	Event string          `json:"event,omitempty"`
	Match json.RawMessage `json:"match,omitempty"`
	Until time.Time       `json:"until,omitzero"`
}

func viewOf(r Run) RunView {
	v := RunView{ID: r.ID, Workflow: r.Workflow, Version: r.Version, UserID: r.UserID, Status: r.Status,
		Data: r.Data, Steps: r.Steps, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if isNull(v.Data) {
		v.Data = json.RawMessage("{}")
	}
	if v.Steps == nil {
		v.Steps = []StepRecord{}
	}
	if r.Status == StatusWaiting {
		v.WaitingFor = &WaitingFor{Event: r.WaitEvent}
		if !isNull(r.WaitMatch) && string(r.WaitMatch) != "{}" {
			v.WaitingFor.Match = r.WaitMatch
		}
		if n := len(r.Steps); n > 0 {
			v.WaitingFor.Until = r.Steps[n-1].Until
		}
	}
	return v
}

// Run returns one run (NotFound when none).
func (s *Service) Run(ctx context.Context, id string) (RunView, error) {
	r, err := s.opts.Store.Run(ctx, id)
	if err != nil {
		return RunView{}, err
	}
	return viewOf(r), nil
}

// The page sizes of Runs.
const (
	defaultRunsPage = 50
	maxRunsPage     = 200
)

// Runs lists the runs matching f, newest first, a page at a time: limit
// (default 50, at most 200) runs and the cursor of the next page ("" at
// the end).
func (s *Service) Runs(ctx context.Context, f RunFilter, cursor string, limit int) ([]RunView, string, error) {
	switch f.Status {
	case "", StatusRunning, StatusWaiting, StatusCompleted, StatusCanceled, StatusFailed:
	default:
		return nil, "", apperr.Fields(apperr.Invalid, "invalid run filter", []apperr.FieldError{{Field: "status",
			Detail: "must be running, waiting, completed, canceled or failed"}})
	}
	if limit <= 0 {
		limit = defaultRunsPage
	}
	runs, next, err := s.opts.Store.Runs(ctx, f, cursor, min(limit, maxRunsPage))
	if err != nil {
		return nil, "", err
	}
	out := make([]RunView, len(runs))
	for i, r := range runs {
		out[i] = viewOf(r)
	}
	return out, next, nil
}

// Cancel cancels the live runs of workflow: userID's, or the run runID
// (one of them is required). It returns the ids canceled (none when they
// had ended); NotFound for an unknown workflow or run.
func (s *Service) Cancel(ctx context.Context, workflow, userID, runID string) ([]string, error) {
	if userID == "" && runID == "" {
		return nil, apperr.Fields(apperr.Unprocessable, "nothing to cancel", []apperr.FieldError{{Field: "user_id",
			Detail: "give user_id or run_id"}})
	}
	if runID != "" {
		r, err := s.opts.Store.Run(ctx, runID)
		if err != nil {
			return nil, err
		}
		if r.Workflow != workflow || (userID != "" && r.UserID != userID) {
			return nil, apperr.New(apperr.NotFound, "workflow %s has no run %s", workflow, runID)
		}
	} else if _, err := s.opts.Store.Workflow(ctx, workflow); err != nil {
		return nil, err
	}
	ids, err := s.opts.Store.CancelRuns(ctx, workflow, userID, runID, s.opts.Now())
	if err != nil {
		return nil, err
	}
	for range ids {
		s.runEnded(workflow, StatusCanceled)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}
