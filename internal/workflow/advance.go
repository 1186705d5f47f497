package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// Step record statuses.
const (
	stepRunning   = "running"
	stepWaiting   = "waiting"
	stepCompleted = "completed"
	stepFailed    = "failed"
)

// The pauses of a send that fails transiently: 5 s, doubling up to 5 min,
// for at most sendRetryFor from its first attempt; then the run fails.
const (
	sendRetryFirst = 5 * time.Second
	sendRetryMax   = 5 * time.Minute
	sendRetryFor   = 24 * time.Hour
)

// move is one step's effect: the run to write, whether the advance stops
// there, and what to report once the write holds.
type move struct {
	run   Run
	stop  bool
	step  *StepRecord // a step that ended (completed or failed)
	kind  string
	ended Status // the run's final status, "" while live
}

// errNoWrite stops an advance without writing: the run is not this
// node's to move (final, or not due).
var errNoWrite = errors.New("nothing to write")

// advanceRun moves *cur, claimed by this node (its Seq current), step by
// step until it waits, ends, or another writer moves it: each step's
// effect is written with UpdateRun on the Seq it read, so a node dying
// mid-advance leaves the run at the step in flight, and a writer that
// moved the run meanwhile (a cancel, an event, another node) wins. *cur
// is kept at the run as last written (advance fails it there if a step
// panics).
func (s *Service) advanceRun(ctx context.Context, cur *Run) {
	r := *cur
	w, err := s.version(ctx, r.Workflow, r.Version)
	if apperr.Is(err, apperr.NotFound) {
		w, err = Workflow{Key: r.Workflow, Version: r.Version}, nil // fails below: no steps
	}
	if err != nil {
		s.opts.Logger.Error("workflow run not advanced: its definition is unreadable", "run_id", r.ID, "workflow", r.Workflow, "err", err)
		return
	}
	s.observeEventResume(w, r)
	for ctx.Err() == nil {
		m, err := s.next(ctx, w, r)
		if errors.Is(err, errNoWrite) {
			return
		}
		if err != nil {
			s.opts.Logger.Warn("workflow run stopped; it is due again when its claim ends", "run_id", r.ID, "workflow", r.Workflow, "err", err)
			return
		}
		if m.run.Status == StatusRunning && m.run.Position >= len(w.Steps) {
			m.run.Status, m.run.DueAt, m.stop = StatusCompleted, time.Time{}, true
			m.ended = StatusCompleted
		}
		m.run.UpdatedAt = s.opts.Now()
		written, err := s.opts.Store.UpdateRun(ctx, m.run, r.Seq)
		if apperr.Is(err, apperr.Conflict) {
			return
		}
		if err != nil {
			s.opts.Logger.Warn("workflow run step not saved; it runs again when its claim ends", "run_id", r.ID, "workflow", r.Workflow, "err", err)
			return
		}
		if m.step != nil {
			s.stepEnded(w.Key, stepLabel(w.Steps[m.step.Index], m.step.Index), m.kind, m.step.Status)
		}
		if m.ended != "" {
			s.runEnded(w.Key, m.ended)
		}
		if m.stop {
			return
		}
		r, *cur = written, written
	}
}

// next works out r's next step: the end of a due wait, or the step at its
// position.
func (s *Service) next(ctx context.Context, w Workflow, r Run) (move, error) {
	now := s.opts.Now()
	switch {
	case r.Status == StatusWaiting:
		return s.waitEnded(w, r, now)
	case r.Status != StatusRunning:
		return move{}, errNoWrite
	case r.Position < 0 || r.Position >= len(w.Steps):
		if len(w.Steps) == 0 {
			return fail(r, now, "", "the workflow's version is gone"), nil
		}
		r.Status, r.DueAt = StatusCompleted, time.Time{}
		return move{run: r, stop: true, ended: StatusCompleted}, nil
	case len(r.Steps) >= s.maxRunSteps:
		return fail(r, now, w.Steps[r.Position].Kind, fmt.Sprintf("too many steps (more than %d)", s.maxRunSteps)), nil
	}
	i, st := r.Position, w.Steps[r.Position]
	rec := StepRecord{Index: i, Name: st.Name, Kind: st.Kind, StartedAt: now}
	r.DueAt = now.Add(s.opts.Lease) // keeps this node's claim while it goes on
	switch st.Kind {
	case KindSend:
		return s.send(ctx, w, r, rec, st.Send)
	case KindWait:
		until, err := s.waitUntil(ctx, r.UserID, st.Wait, now)
		if err != nil {
			return move{}, err
		}
		rec.Status, rec.Until = stepWaiting, until
		r.Status, r.DueAt, r.Steps = StatusWaiting, until, appendStep(r.Steps, rec)
		return move{run: r, stop: true}, nil
	case KindWaitFor:
		match, err := resolveMatch(st.WaitFor.Match, r.Data)
		if err != nil {
			return fail(r, now, st.Kind, "its match does not resolve: "+err.Error()), nil
		}
		rec.Status = stepWaiting
		if st.WaitFor.Timeout > 0 {
			rec.Until = now.Add(st.WaitFor.Timeout)
		}
		r.Status, r.DueAt, r.WaitEvent, r.WaitMatch = StatusWaiting, rec.Until, st.WaitFor.Event, match
		r.Steps = appendStep(r.Steps, rec)
		return move{run: r, stop: true}, nil
	case KindBranch:
		to, outcome, err := s.branch(ctx, w, r, st)
		if err != nil {
			return move{}, err
		}
		return jump(r, rec, now, to, outcome), nil
	case KindSplit:
		return s.split(w, r, rec, st, now), nil
	case KindExit:
		rec.Status, rec.EndedAt, rec.Outcome = stepCompleted, now, "exit"
		r.Status, r.DueAt, r.Steps = StatusCompleted, time.Time{}, appendStep(r.Steps, rec)
		return move{run: r, stop: true, step: &r.Steps[len(r.Steps)-1], kind: KindExit, ended: StatusCompleted}, nil
	}
	return fail(r, now, st.Kind, fmt.Sprintf("unknown step kind %q", st.Kind)), nil
}

// waitEnded ends a due wait: a wait goes on to the next step; a wait_for
// that timed out goes to its on_timeout step, or ends the run.
func (s *Service) waitEnded(w Workflow, r Run, now time.Time) (move, error) {
	if r.Position < 0 || r.Position >= len(w.Steps) || len(r.Steps) == 0 {
		return fail(r, now, "", "the workflow's version is gone"), nil
	}
	st, last := w.Steps[r.Position], r.Steps[len(r.Steps)-1]
	if last.Until.IsZero() { // a wait_for without a timeout: only its event moves it
		r.DueAt = time.Time{}
		return move{run: r, stop: true}, nil
	}
	if last.Until.After(now) { // claimed early (clocks apart): due again at its time
		r.DueAt = last.Until
		return move{run: r, stop: true}, nil
	}
	s.resumed(w.Key, "deadline", now.Sub(last.Until))
	outcome := "waited"
	if st.Kind == KindWaitFor {
		outcome = "timed out"
	}
	r.Steps = endWaiting(r.Steps, now, stepCompleted, outcome)
	m := move{run: r, step: &r.Steps[len(r.Steps)-1], kind: st.Kind}
	m.run.Status, m.run.DueAt, m.run.WaitEvent, m.run.WaitMatch = StatusRunning, now.Add(s.opts.Lease), "", nil
	m.run.Position = r.Position + 1
	if st.Kind == KindWaitFor {
		if st.OnTimeout == "" {
			m.run.Status, m.run.DueAt, m.stop, m.ended = StatusCompleted, time.Time{}, true, StatusCompleted
		} else {
			m.run.Position = w.index(st.OnTimeout)
		}
	}
	return m, nil
}

// send sends a send step's notification, idempotent on its request id:
// a run at this step again after a crash sends nothing twice.
func (s *Service) send(ctx context.Context, w Workflow, r Run, rec StepRecord, snd *Send) (move, error) {
	i := r.Position
	retrying := len(r.Steps) > 0 && r.Steps[len(r.Steps)-1].Index == i && r.Steps[len(r.Steps)-1].Status == stepRunning
	if retrying {
		prev := r.Steps[len(r.Steps)-1]
		rec.StartedAt, rec.Attempts = prev.StartedAt, prev.Attempts
		r.Steps = r.Steps[: len(r.Steps)-1 : len(r.Steps)-1]
	}
	if s.opts.Sender == nil {
		return fail(r, rec.StartedAt, KindSend, "no sender is configured"), nil
	}
	req := notify.Request{RequestID: sendRequestID(r, i), UserID: r.UserID, Type: snd.Type, Channels: snd.Channels, Data: r.Data}
	acc, err := s.opts.Sender.Send(ctx, req)
	now := s.opts.Now()
	rec.Attempts++
	switch {
	case err == nil:
		rec.Status, rec.EndedAt, rec.NotificationID, rec.Outcome = stepCompleted, now, acc.NotificationID, ""
		if rec.Attempts == 1 {
			rec.Attempts = 0 // shown only after a retry
		}
		r.Position++
	case ctx.Err() != nil:
		return move{}, ctx.Err()
	case permanent(err) || now.Sub(rec.StartedAt) >= sendRetryFor:
		rec.Status, rec.EndedAt, rec.Outcome = stepFailed, now, "send failed: "+message(err)
		r.Status, r.DueAt = StatusFailed, time.Time{}
	default:
		rec.Status, rec.Outcome = stepRunning, "retrying: "+message(err)
		r.DueAt = now.Add(min(sendRetryMax, sendRetryFirst<<min(rec.Attempts-1, 10)))
		r.Steps = appendStep(r.Steps, rec)
		return move{run: r, stop: true}, nil
	}
	r.Steps = appendStep(r.Steps, rec)
	m := move{run: r, step: &r.Steps[len(r.Steps)-1], kind: KindSend}
	if r.Status == StatusFailed {
		m.stop, m.ended = true, StatusFailed
	}
	return m, nil
}

// sendRequestID is a send's request id: "wf:<run id>:<step index>", and
// ":<n>" after it for the n-th time a loop runs the same step.
func sendRequestID(r Run, i int) string {
	n := 1
	for _, rec := range r.Steps {
		if rec.Index == i && rec.Kind == KindSend && rec.Status != stepRunning {
			n++
		}
	}
	id := fmt.Sprintf("wf:%s:%d", r.ID, i)
	if n > 1 {
		id += fmt.Sprintf(":%d", n)
	}
	return id
}

// permanent reports a send error that trying again cannot cure.
func permanent(err error) bool {
	switch apperr.CodeOf(err) {
	case apperr.Invalid, apperr.Unprocessable, apperr.NotFound, apperr.Conflict, apperr.Forbidden, apperr.Gone:
		return true
	}
	return false
}

// message is err's client-facing message when it has one.
func message(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	return err.Error()
}

// jump ends a branch or split step at rec, going to step to (-1: exit).
func jump(r Run, rec StepRecord, now time.Time, to int, outcome string) move {
	rec.Status, rec.EndedAt, rec.Outcome = stepCompleted, now, outcome
	r.Steps = appendStep(r.Steps, rec)
	m := move{run: r, step: &r.Steps[len(r.Steps)-1], kind: rec.Kind}
	if to < 0 {
		m.run.Status, m.run.DueAt, m.stop, m.ended = StatusCompleted, time.Time{}, true, StatusCompleted
		return m
	}
	m.run.Position = to
	return m
}

// fail ends r as failed, with a failed record of its step (of kind) that
// says why.
func fail(r Run, now time.Time, kind, outcome string) move {
	rec := StepRecord{Index: r.Position, Kind: kind, Status: stepFailed, StartedAt: now, EndedAt: now, Outcome: outcome}
	r.Steps = appendStep(r.Steps, rec)
	r.Status, r.DueAt, r.WaitEvent, r.WaitMatch = StatusFailed, time.Time{}, "", nil
	return move{run: r, stop: true, ended: StatusFailed}
}

// appendStep appends to a copy of steps (the slice may be shared).
func appendStep(steps []StepRecord, rec StepRecord) []StepRecord {
	return append(steps[:len(steps):len(steps)], rec)
}
