package workflow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// BatchResult is one event's answer in IngestBatch: Error is set when the
// event was refused (and Accepted is then empty).
type BatchResult struct {
	Accepted
	Error *apperr.Error
}

// maxWaitingPerEvent bounds the waiting runs one event may resume.
const maxWaitingPerEvent = 100

// Ingest takes in one event: it starts a run of every workflow whose
// trigger names it (unless the user entered within the workflow's
// entry.once_per, or holds MaxLiveRunsPerUser live runs already) and
// resumes the user's runs waiting for it whose match holds, all in one
// write, then hands those runs to this node's scheduler. A repeated
// request_id is answered with the first answer (Duplicate), or Conflict
// when its body differs.
func (s *Service) Ingest(ctx context.Context, req EventRequest) (Accepted, error) {
	e, err := newEvent(req)
	if err != nil {
		return Accepted{}, err
	}
	if e.RequestID != "" {
		if a, done, err := s.duplicate(ctx, e); done {
			return a, err
		}
	}
	now := s.opts.Now()
	e.ID, e.CreatedAt = notify.NewID("evt_", now), now
	start, oncePer, err := s.starts(ctx, e)
	if err != nil {
		return Accepted{}, err
	}
	resume, err := s.resumes(ctx, e)
	if err != nil {
		return Accepted{}, err
	}
	saved, created, err := s.opts.Store.RecordEvent(ctx, e, start, oncePer, resume)
	if err != nil {
		return Accepted{}, err
	}
	if !created {
		if saved.Hash != e.Hash {
			return Accepted{}, conflict(e.RequestID)
		}
		return accepted(saved, true), nil
	}
	workflowOf := map[string]string{}
	for _, r := range start {
		workflowOf[r.ID] = r.Workflow
	}
	for _, id := range saved.RunsStarted {
		s.runStarted(workflowOf[id])
	}
	for _, rs := range resume {
		if rs.Run.Status == StatusFailed && slices.Contains(saved.RunsResumed, rs.Run.ID) {
			s.runEnded(rs.Run.Workflow, StatusFailed)
		}
	}
	s.wakeUp(saved.RunsStarted)
	s.wakeUp(saved.RunsResumed)
	return accepted(saved, false), nil
}

// IngestBatch takes in up to MaxBatch events, one at a time in order,
// answering each: an event refused (invalid, a request_id reused with
// another body) has its Error and the others go on. A failure of the
// store ends the batch with that error; the events before it are saved,
// so a client sending request_ids may send the whole batch again.
func (s *Service) IngestBatch(ctx context.Context, es []EventRequest) ([]BatchResult, error) {
	if len(es) == 0 || len(es) > MaxBatch {
		return nil, apperr.Fields(apperr.Unprocessable, "the batch is invalid",
			[]apperr.FieldError{{Field: "events", Detail: fmt.Sprintf("must hold 1 to %d events", MaxBatch)}})
	}
	out := make([]BatchResult, len(es))
	for i, req := range es {
		a, err := s.Ingest(ctx, req)
		if err != nil {
			ae, ok := err.(*apperr.Error)
			if !ok || !refusal(ae.Code) {
				return nil, fmt.Errorf("event %d of the batch: %w", i, err)
			}
			out[i].Error = ae
			continue
		}
		out[i].Accepted = a
	}
	return out, nil
}

// refusal reports an error code that refuses one event, not the batch.
func refusal(c apperr.Code) bool {
	switch c {
	case apperr.Invalid, apperr.Unprocessable, apperr.Conflict, apperr.TooMany:
		return true
	}
	return false
}

// newEvent validates req and returns its event, Data compacted and Hash
// set.
func newEvent(req EventRequest) (Event, error) {
	var p problems
	if msg := checkEventName(req.Name); msg != "" {
		p.add("name", "%s", msg)
	}
	switch {
	case req.UserID == "":
		p.add("user_id", "is required")
	case len(req.UserID) > notify.MaxUserIDBytes || !printable(req.UserID):
		p.add("user_id", "must be at most %d printable bytes", notify.MaxUserIDBytes)
	case notify.IsSystemUser(req.UserID):
		p.add("user_id", "must not start with %s (reserved for Sluice's own messages)", notify.SystemUserPrefix)
	}
	if len(req.RequestID) > notify.MaxRequestIDBytes || !printable(req.RequestID) {
		p.add("request_id", "must be at most %d printable bytes", notify.MaxRequestIDBytes)
	}
	data := json.RawMessage("{}")
	switch t := bytes.TrimSpace(req.Data); {
	case len(req.Data) > MaxEventDataBytes:
		p.add("data", "must be at most %d bytes", MaxEventDataBytes)
	case len(t) == 0 || string(t) == "null":
	case t[0] != '{' || !json.Valid(t):
		p.add("data", "must be a JSON object")
	case !utf8.Valid(t):
		p.add("data", "must be valid UTF-8")
	case DataDepth(t) > MaxDataDepth:
		p.add("data", "must nest objects and arrays at most %d deep", MaxDataDepth)
	default:
		data = compact(t)
	}
	if err := apperr.Fields(apperr.Unprocessable, "the event is invalid", p); err != nil {
		return Event{}, err
	}
	e := Event{RequestID: req.RequestID, Name: req.Name, UserID: req.UserID, Data: data}
	e.Hash = eventHash(e)
	return e, nil
}

// eventHash digests what makes two events the same: name, user and data
// (keys in canonical order).
func eventHash(e Event) string {
	var data any
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.UseNumber()
	_ = dec.Decode(&data)
	canon, _ := json.Marshal(data) // maps marshal with sorted keys
	h := sha256.New()
	for _, part := range []string{e.Name, e.UserID, string(canon)} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// duplicate answers an event whose request_id is taken: done false when
// it is not.
func (s *Service) duplicate(ctx context.Context, e Event) (Accepted, bool, error) {
	prev, err := s.opts.Store.EventByRequestID(ctx, e.RequestID)
	switch {
	case apperr.Is(err, apperr.NotFound):
		return Accepted{}, false, nil
	case err != nil:
		return Accepted{}, true, err
	case prev.Hash != e.Hash:
		return Accepted{}, true, conflict(e.RequestID)
	}
	return accepted(prev, true), true, nil
}

func conflict(requestID string) error {
	return &apperr.Error{Code: apperr.Conflict,
		Message: "request_id " + requestID + " was already used with a different event",
		Fields:  []apperr.FieldError{{Field: "request_id", Detail: "already used with a different event"}}}
}

func accepted(e Event, dup bool) Accepted {
	return Accepted{EventID: e.ID, RunsStarted: nonNil(e.RunsStarted), RunsResumed: nonNil(e.RunsResumed), Duplicate: dup}
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// starts builds the runs e starts, with each workflow's once_per. A user
// at MaxLiveRunsPerUser starts none.
func (s *Service) starts(ctx context.Context, e Event) ([]Run, map[string]time.Duration, error) {
	stored, err := s.opts.Store.WorkflowsTriggeredBy(ctx, e.Name)
	if err != nil || len(stored) == 0 {
		return nil, nil, err
	}
	if err := s.checkLiveRuns(len(stored)); err != nil {
		return nil, nil, err
	}
	live, err := s.opts.Store.CountLiveRuns(ctx, e.UserID)
	if err != nil {
		return nil, nil, err
	}
	if live+len(stored) > s.opts.MaxLiveRunsPerUser {
		s.opts.Logger.Warn("workflow runs not started: the user holds too many live runs",
			"user_id", e.UserID, "event", e.Name, "live", live, "max", s.opts.MaxLiveRunsPerUser)
		return nil, nil, nil
	}
	var start []Run
	oncePer := map[string]time.Duration{}
	for _, st := range stored {
		w, err := s.workflowOf(st)
		if err != nil {
			return nil, nil, err
		}
		if w.Entry.OncePer > 0 {
			oncePer[w.Key] = w.Entry.OncePer
		}
		start = append(start, Run{
			ID: notify.NewID("run_", e.CreatedAt), Workflow: w.Key, Version: w.Version, UserID: e.UserID,
			Status: StatusRunning, Data: e.Data, DueAt: e.CreatedAt, EventID: e.ID,
			CreatedAt: e.CreatedAt, UpdatedAt: e.CreatedAt,
		})
	}
	return start, oncePer, nil
}

// resumes builds the resumption of each of the user's runs waiting for e
// whose match holds: the wait_for's record completed, the event's data
// under its name in the run's data, and the run due now at the next step.
func (s *Service) resumes(ctx context.Context, e Event) ([]Resume, error) {
	waiting, err := s.opts.Store.WaitingRuns(ctx, e.UserID, e.Name, e.CreatedAt, maxWaitingPerEvent)
	if err != nil {
		return nil, err
	}
	var out []Resume
	for _, r := range waiting {
		if r.Status != StatusWaiting || r.WaitEvent != e.Name || !matches(r.WaitMatch, e.Data) {
			continue
		}
		data, err := mergeData(r.Data, e.Name, e.Data)
		if err != nil {
			s.opts.Logger.Error("workflow run not resumed: its data does not merge", "run_id", r.ID, "err", err)
			continue
		}
		seq := r.Seq
		if len(data) > MaxRunDataBytes {
			r.Status, r.DueAt, r.UpdatedAt, r.WaitEvent, r.WaitMatch = StatusFailed, time.Time{}, e.CreatedAt, "", nil
			r.Steps = endWaiting(r.Steps, e.CreatedAt, stepFailed, fmt.Sprintf("event %s would take the run's data to %d bytes, past %d",
				e.ID, len(data), MaxRunDataBytes))
			out = append(out, Resume{Run: r, Seq: seq})
			continue
		}
		r.Data, r.Status, r.Position, r.DueAt, r.UpdatedAt = data, StatusRunning, r.Position+1, e.CreatedAt, e.CreatedAt
		r.WaitEvent, r.WaitMatch = "", nil
		r.Steps = endWaiting(r.Steps, e.CreatedAt, "completed", "event "+e.ID)
		out = append(out, Resume{Run: r, Seq: seq})
	}
	return out, nil
}

// endWaiting returns steps with the last record, if waiting, ended with
// status and outcome (a copy: the slice may be shared).
func endWaiting(steps []StepRecord, now time.Time, status, outcome string) []StepRecord {
	steps = append([]StepRecord(nil), steps...)
	if n := len(steps); n > 0 && steps[n-1].Status == "waiting" {
		steps[n-1].Status, steps[n-1].EndedAt, steps[n-1].Outcome = status, now, outcome
	}
	return steps
}

// wakeUp hands ids to this node's scheduler; when it is busy, or not
// running, the runs are due anyway and the next claim takes them.
func (s *Service) wakeUp(ids []string) {
	for _, id := range ids {
		select {
		case s.wake <- id:
		default:
			return
		}
	}
}
