package workflow

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// AttributeStore keeps each user's attributes, a JSON object per user
// (*store.DB implements it). Service wraps it with the bound on the
// users with attributes.
type AttributeStore interface {
	// PutUserAttributes writes user's attributes, a row added or replaced.
	PutUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) error
	// ReplaceUserAttributes writes them only over a stored row, and
	// reports whether there was one.
	ReplaceUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) (bool, error)
	// UserAttributes answers {} for a user without any.
	UserAttributes(ctx context.Context, user string) (json.RawMessage, error)
	// DeleteUserAttributes deletes them, reporting whether there were any.
	DeleteUserAttributes(ctx context.Context, user string) (bool, error)
	// CountUserAttributes counts the users with attributes.
	CountUserAttributes(ctx context.Context) (int64, error)
}

// tally is a count of rows read from the store now and then, plus what
// this node added and removed since: the caps are checked against it,
// never against a count per request. Between two counts it misses what
// other nodes did meanwhile, so a burst across nodes may pass a cap by
// what they add in one CountEvery.
type tally struct {
	mu      sync.Mutex
	counted int64     // the store's count at at
	at      time.Time // zero: never counted
	delta   int64     // this node's changes since
}

func (t *tally) estimate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(0, t.counted+t.delta)
}

func (t *tally) add(n int) {
	t.mu.Lock()
	t.delta += int64(n)
	t.mu.Unlock()
}

func (t *tally) set(n int64, at time.Time) {
	t.mu.Lock()
	t.counted, t.at, t.delta = n, at, 0
	t.mu.Unlock()
}

// checkLiveRuns refuses n more live runs past MaxLiveRuns.
func (s *Service) checkLiveRuns(n int) error {
	if live := s.live.estimate(); live+int64(n) > int64(s.opts.MaxLiveRuns) {
		return apperr.New(apperr.TooMany, "%d workflow runs are live, the bound (notify.workflows.max_live_runs, %d); "+
			"an event that starts runs is refused until some end or are canceled", live, s.opts.MaxLiveRuns)
	}
	return nil
}

// checkVersions refuses a new version of key past MaxVersions.
func (s *Service) checkVersions(ctx context.Context, key string) error {
	n, err := s.opts.Store.CountWorkflowVersions(ctx, key)
	if err != nil {
		return err
	}
	if n >= s.maxVersions {
		return apperr.New(apperr.TooMany, "workflow %s keeps %d versions, the bound (%d); the versions no live run is on are "+
			"deleted notify.workflows.retention after a later one replaced them", key, n, s.maxVersions)
	}
	return nil
}

// RunCounts counts the live runs per workflow and status, for the runs
// gauge: the count RunScheduler reads every CountEvery when it is no
// older than that, else one read now. Every node's gauge and caps so
// share one count.
func (s *Service) RunCounts(ctx context.Context) (map[string]map[Status]int64, error) {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	if !s.runCountsAt.IsZero() && s.opts.Now().Sub(s.runCountsAt) < s.opts.CountEvery {
		return s.runCounts, nil
	}
	return s.countRunsLocked(ctx)
}

// countRuns reads the live runs from the store, for MaxLiveRuns and the
// gauge.
func (s *Service) countRuns(ctx context.Context) error {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	_, err := s.countRunsLocked(ctx)
	return err
}

func (s *Service) countRunsLocked(ctx context.Context) (map[string]map[Status]int64, error) {
	at := s.opts.Now()
	counts, err := s.opts.Store.CountRuns(ctx)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, byStatus := range counts {
		for _, n := range byStatus {
			total += n
		}
	}
	s.live.set(total, at)
	s.runCounts, s.runCountsAt = counts, at
	return counts, nil
}

// countAttributes reads the users with attributes from the store, for
// MaxAttributeUsers.
func (s *Service) countAttributes(ctx context.Context) error {
	if s.opts.Attributes == nil {
		return nil
	}
	at := s.opts.Now()
	n, err := s.opts.Attributes.CountUserAttributes(ctx)
	if err == nil {
		s.attrUsers.set(n, at)
	}
	return err
}

// keepCounting counts the live runs and the users with attributes now
// and every CountEvery until ctx ends.
func (s *Service) keepCounting(ctx context.Context) {
	t := time.NewTicker(s.opts.CountEvery)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, max(s.opts.CountEvery, 10*time.Second))
		for _, count := range []func(context.Context) error{s.countRuns, s.countAttributes} {
			if err := count(cctx); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("count for the workflow caps", "err", err)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PutUserAttributes replaces user's attributes with attrs, a JSON object
// the caller validated, compacted and bounded (16 KiB); an empty object
// deletes them, so the user holds no row. A user with no attributes
// stored is refused (TooMany) once MaxAttributeUsers users have some; a
// user with attributes may always replace them.
func (s *Service) PutUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) error {
	a := s.opts.Attributes
	if a == nil {
		return apperr.New(apperr.Unavailable, "user attributes are not configured on this server")
	}
	if string(attrs) == "{}" {
		return s.DeleteUserAttributes(ctx, user)
	}
	if replaced, err := a.ReplaceUserAttributes(ctx, user, attrs, now); err != nil || replaced {
		return err
	}
	if n := s.attrUsers.estimate(); n >= int64(s.opts.MaxAttributeUsers) {
		return apperr.New(apperr.TooMany, "%d users have attributes, the bound (notify.workflows.max_attribute_users, %d); "+
			"a user without attributes gets none until some are deleted (PUT {})", n, s.opts.MaxAttributeUsers)
	}
	if err := a.PutUserAttributes(ctx, user, attrs, now); err != nil {
		return err
	}
	s.attrUsers.add(1)
	return nil
}

// UserAttributes returns user's attributes, {} when none.
func (s *Service) UserAttributes(ctx context.Context, user string) (json.RawMessage, error) {
	if s.opts.Attributes == nil {
		return nil, apperr.New(apperr.Unavailable, "user attributes are not configured on this server")
	}
	return s.opts.Attributes.UserAttributes(ctx, user)
}

// DeleteUserAttributes deletes user's attributes.
func (s *Service) DeleteUserAttributes(ctx context.Context, user string) error {
	if s.opts.Attributes == nil {
		return apperr.New(apperr.Unavailable, "user attributes are not configured on this server")
	}
	had, err := s.opts.Attributes.DeleteUserAttributes(ctx, user)
	if had {
		s.attrUsers.add(-1)
	}
	return err
}
