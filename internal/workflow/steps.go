package workflow

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// waitUntil returns when a wait step reached at now ends: now plus its
// duration, or the next until_local time of day in the user's time zone
// (UTC when the user has none, or an unknown one).
func (s *Service) waitUntil(ctx context.Context, user string, w *Wait, now time.Time) (time.Time, error) {
	if w.UntilLocal == "" {
		return now.Add(w.For), nil
	}
	hour, minute, err := parseClock(w.UntilLocal)
	if err != nil {
		return time.Time{}, err
	}
	loc := time.UTC
	if s.opts.Profiles != nil {
		settings, err := s.opts.Profiles.Settings(ctx, user)
		if err != nil && !apperr.Is(err, apperr.NotFound) {
			return time.Time{}, fmt.Errorf("read the settings of user %q: %w", user, err)
		}
		if settings.Timezone != "" {
			if l, err := time.LoadLocation(settings.Timezone); err == nil {
				loc = l
			}
		}
	}
	return nextLocal(now, loc, hour, minute), nil
}

// nextLocal returns the first hour:minute in loc after now. A time a
// daylight-saving jump skips is read as time.Date does (moved forward).
func nextLocal(now time.Time, loc *time.Location, hour, minute int) time.Time {
	local := now.In(loc)
	at := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
	if !at.After(now) {
		at = time.Date(local.Year(), local.Month(), local.Day()+1, hour, minute, 0, 0, loc)
	}
	return at
}

// branch returns the step a branch goes to (its first path whose
// condition holds, else its else, else the next step) and the record's
// outcome.
func (s *Service) branch(ctx context.Context, w Workflow, r Run, st Step) (int, string, error) {
	data, _ := decode(r.Data)
	var attrs any
	for k, p := range st.Branch {
		var v any
		var ok bool
		if name, isUser := cutUser(p.Key); isUser {
			if attrs == nil {
				if attrs, ok = s.attributes(ctx, r.UserID); !ok {
					return 0, "", fmt.Errorf("read the attributes of user %q", r.UserID)
				}
			}
			v, ok = lookup(attrs, name)
		} else {
			v, ok = lookup(data, p.Key)
		}
		if holds(p, v, ok) {
			return w.index(p.Goto), fmt.Sprintf("path %d: %s", k+1, p.Goto), nil
		}
	}
	if st.Else != "" {
		return w.index(st.Else), "else: " + st.Else, nil
	}
	return r.Position + 1, "no path held", nil
}

func cutUser(key string) (string, bool) {
	if len(key) > 5 && key[:5] == "user." {
		return key[5:], true
	}
	return "", false
}

// attributes reads a user's attributes ({} when none, or no Profiles).
func (s *Service) attributes(ctx context.Context, user string) (any, bool) {
	if s.opts.Profiles == nil {
		return map[string]any{}, true
	}
	raw, err := s.opts.Profiles.UserAttributes(ctx, user)
	if apperr.Is(err, apperr.NotFound) || (err == nil && isNull(raw)) {
		return map[string]any{}, true
	}
	if err != nil {
		s.opts.Logger.Warn("user attributes unreadable", "user_id", user, "err", err)
		return nil, false
	}
	v, err := decode(raw)
	if err != nil {
		return map[string]any{}, true
	}
	return v, true
}

// holds reports whether a branch path's condition holds for v (found
// says whether the key is there; JSON null counts as absent).
func holds(p BranchPath, v any, found bool) bool {
	found = found && v != nil
	want, err := decode(p.Value)
	if err != nil {
		return false
	}
	switch p.Op {
	case "exists":
		return found == (want == true)
	case "eq":
		return (found && equal(v, want)) || (!found && want == nil)
	case "ne":
		return !((found && equal(v, want)) || (!found && want == nil))
	case "in":
		vs, _ := want.([]any)
		for _, x := range vs {
			if (found && equal(v, x)) || (!found && x == nil) {
				return true
			}
		}
		return false
	}
	if !found {
		return false
	}
	c, ok := compare(v, want)
	if !ok {
		return false
	}
	switch p.Op {
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	case "lte":
		return c <= 0
	}
	return false
}

// split picks one of a split's paths at random, by their percents.
func (s *Service) split(w Workflow, r Run, rec StepRecord, st Step, now time.Time) move {
	x := s.opts.Rand() * 100
	pick := len(st.Split) - 1
	sum := 0.0
	for k, p := range st.Split {
		if sum += float64(p.Percent); x < sum {
			pick = k
			break
		}
	}
	p := st.Split[pick]
	to := -1
	if p.Goto != Exit {
		to = w.index(p.Goto)
	}
	return jump(r, rec, now, to, fmt.Sprintf("path %d: %s", pick+1, p.Goto))
}

// The metrics hooks, skipped when nil; a run started or ended also
// moves the count MaxLiveRuns is checked against.

func (s *Service) runStarted(workflow string) {
	s.live.add(1)
	if f := s.opts.Metrics.RunStarted; f != nil {
		f(workflow)
	}
}

func (s *Service) runEnded(workflow string, status Status) {
	s.live.add(-1)
	if f := s.opts.Metrics.RunEnded; f != nil {
		f(workflow, status)
	}
}

func (s *Service) stepEnded(workflow, step, kind, status string) {
	if f := s.opts.Metrics.StepEnded; f != nil {
		f(workflow, step, kind, status)
	}
}

func (s *Service) resumed(workflow, by string, late time.Duration) {
	if f := s.opts.Metrics.Resumed; f != nil {
		f(workflow, by, max(0, late))
	}
}

// observeEventResume reports how late a run an event resumed is taken up:
// its last record is the wait_for the event ended, and no step ran since.
func (s *Service) observeEventResume(w Workflow, r Run) {
	if n := len(r.Steps); r.Status == StatusRunning && n > 0 {
		last := r.Steps[n-1]
		if last.Kind == KindWaitFor && last.Status == stepCompleted && len(last.Outcome) > 6 && last.Outcome[:6] == "event " {
			s.resumed(w.Key, "event", s.opts.Now().Sub(last.EndedAt))
		}
	}
}
